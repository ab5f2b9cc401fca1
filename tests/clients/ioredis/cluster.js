// ioredis's Cluster client pointed at redis-guard with `face: cluster` (argv: host port keys-prefix):
// what it discovers and what its commands return, as one JSON object on stdout
// (tests/cluster/test_face_ioredis.py checks it).
"use strict";
const Redis = require("ioredis");

async function main() {
  const [host, port, prefix] = [process.argv[2], Number(process.argv[3]), process.argv[4]];
  const cluster = new Redis.Cluster([{ host, port }], {
    redisOptions: { connectTimeout: 5000, commandTimeout: 20000 },
    clusterRetryStrategy: () => null, // a failure is the test's answer, not a retry loop
  });
  const out = {};
  try {
    const keys = Array.from({ length: 40 }, (_, i) => `${prefix}:${i}`);
    for (const key of keys) await cluster.set(key, `v-${key}`);
    out.get = await Promise.all(keys.map((key) => cluster.get(key)));
    // One node owns every slot: a pipeline over keys of every slot is one node's pipeline.
    const pipeline = cluster.pipeline();
    keys.forEach((key) => pipeline.incr(`${key}:n`));
    out.pipeline = (await pipeline.exec()).map(([err, value]) => (err ? String(err) : value));
    out.mget = await cluster.mget(...keys); // across slots: the proxy splits it
    out.nodes = cluster.nodes("all").map((node) => `${node.options.host}:${node.options.port}`);
    out.slots = await cluster.cluster("SLOTS");
    out.info = (await cluster.info("cluster")).trim();
    // pub/sub through the cluster client's subscriber connection
    const sub = cluster.duplicate();
    out.message = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no message within 10 s")), 10000);
      sub.on("message", (channel, message) => { clearTimeout(timer); resolve(`${channel}:${message}`); });
      sub.subscribe(`${prefix}-news`).then(() => cluster.publish(`${prefix}-news`, "hello"), reject);
    });
    sub.disconnect();
    // every key back, one master at a time behind the proxy: SCAN on the one node
    const scanned = new Set();
    let cursor = "0";
    for (let round = 0; round < 1000; round++) {
      const [next, found] = await cluster.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 20);
      found.forEach((key) => scanned.add(key));
      cursor = next;
      if (cursor === "0") break;
    }
    out.scanned = [...scanned].sort();
    await cluster.del(...keys, ...keys.map((key) => `${key}:n`));
  } catch (error) {
    out.error = String(error && error.stack || error);
  } finally {
    cluster.disconnect();
  }
  process.stdout.write(JSON.stringify(out));
}

main();
