"""Real replies captured by ``python -m tests.routing.capture_replies`` (see its docstring)
from redis-server 7.0.15: exact bytes, parsed at test time by hiredis."""

REPLICA_OF = {31004: 31002, 31005: 31003, 31006: 31001}  # replica port -> master port

REPLIES: dict[str, bytes] = {
    'lone_no_slots_get': (
        b'-CLUSTERDOWN Hash slot not served\r\n'
    ),
    'lone_shards': (
        b'*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\nid\r\n$40\r\n238ef59d4ec25d7217c953'
        b'1a4c8b477ef87405ce\r\n$4\r\nport\r\n:31000\r\n$2\r\nip\r\n$0\r\n\r\n$8\r\nendpoint\r\n$0\r\n\r\n$4\r\nrole\r\n$6\r\nmast'
        b'er\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n'
    ),
    'lone_slots': (
        b'*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$0\r\n\r\n:31000\r\n$40\r\n238ef59d4ec25d7217c9531a4c8b477ef87405ce\r\n*0\r\n'
    ),
    'loading_shards': (
        b'*3\r\n*4\r\n$5\r\nslots\r\n*2\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\nid\r\n$40\r\n9864bc7bf77f7fb778'
        b'fde523bac1dbe28ca9ffa4\r\n$4\r\nport\r\n:31003\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0'
        b'.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid'
        b'\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n$4\r\nport\r\n:31005\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n'
        b'$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealt'
        b'h\r\n$7\r\nloading\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\nid\r\n$40\r\nfe071704766'
        b'0b35ce89a0d38983c95afe11a0025\r\n$4\r\nport\r\n:31001\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n'
        b'127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r'
        b'\n$2\r\nid\r\n$40\r\nbf2992a67543fa0c4b2d8be0809ed37babcf839b\r\n$4\r\nport\r\n:31006\r\n$2\r\nip\r\n$9\r\n127.'
        b'0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:0\r\n$6'
        b'\r\nhealth\r\n$7\r\nloading\r\n*4\r\n$5\r\nslots\r\n*2\r\n:5461\r\n:10922\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\nid\r\n$40\r\n'
        b'4e23d17a7d85453f3c083b08c420f837011c9b45\r\n$4\r\nport\r\n:31002\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nend'
        b'point\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\no'
        b'nline\r\n*14\r\n$2\r\nid\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n$4\r\nport\r\n:31004\r\n$2\r\ni'
        b'p\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-off'
        b'set\r\n:0\r\n$6\r\nhealth\r\n$7\r\nloading\r\n'
    ),
    'online_shards': (
        b'*3\r\n*4\r\n$5\r\nslots\r\n*2\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\nid\r\n$40\r\n9864bc7bf77f7fb778'
        b'fde523bac1dbe28ca9ffa4\r\n$4\r\nport\r\n:31003\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0'
        b'.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:70\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\ni'
        b'd\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n$4\r\nport\r\n:31005\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r'
        b'\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:70\r\n$6\r\nhea'
        b'lth\r\n$6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\nid\r\n$40\r\nfe07170476'
        b'60b35ce89a0d38983c95afe11a0025\r\n$4\r\nport\r\n:31001\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r'
        b'\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:70\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*1'
        b'4\r\n$2\r\nid\r\n$40\r\nbf2992a67543fa0c4b2d8be0809ed37babcf839b\r\n$4\r\nport\r\n:31006\r\n$2\r\nip\r\n$9\r\n12'
        b'7.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:70\r'
        b'\n$6\r\nhealth\r\n$6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*2\r\n:5461\r\n:10922\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\nid\r\n$40'
        b'\r\n4e23d17a7d85453f3c083b08c420f837011c9b45\r\n$4\r\nport\r\n:31002\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\ne'
        b'ndpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:70\r\n$6\r\nhealth\r\n$6'
        b'\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n$4\r\nport\r\n:31004\r\n$2'
        b'\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-'
        b'offset\r\n:70\r\n$6\r\nhealth\r\n$6\r\nonline\r\n'
    ),
    'online_slots': (
        b'*3\r\n*4\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:31001\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a002'
        b'5\r\n*0\r\n*4\r\n$9\r\n127.0.0.1\r\n:31006\r\n$40\r\nbf2992a67543fa0c4b2d8be0809ed37babcf839b\r\n*0\r\n*4\r\n:'
        b'5461\r\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:31002\r\n$40\r\n4e23d17a7d85453f3c083b08c420f837011c9b45\r\n*0'
        b'\r\n*4\r\n$9\r\n127.0.0.1\r\n:31004\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n*0\r\n*4\r\n:10923'
        b'\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:31003\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n*0\r\n*4'
        b'\r\n$9\r\n127.0.0.1\r\n:31005\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n*0\r\n'
    ),
    'online_shards_resp3': (
        b'*3\r\n%2\r\n$5\r\nslots\r\n*2\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*2\r\n%7\r\n$2\r\nid\r\n$40\r\n9864bc7bf77f7fb778f'
        b'de523bac1dbe28ca9ffa4\r\n$4\r\nport\r\n:31003\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.'
        b'1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:70\r\n$6\r\nhealth\r\n$6\r\nonline\r\n%7\r\n$2\r\nid\r'
        b'\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n$4\r\nport\r\n:31005\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$'
        b'8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:70\r\n$6\r\nhealt'
        b'h\r\n$6\r\nonline\r\n%2\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\nnodes\r\n*2\r\n%7\r\n$2\r\nid\r\n$40\r\nfe0717047660b'
        b'35ce89a0d38983c95afe11a0025\r\n$4\r\nport\r\n:31001\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n12'
        b'7.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:70\r\n$6\r\nhealth\r\n$6\r\nonline\r\n%7\r\n$'
        b'2\r\nid\r\n$40\r\nbf2992a67543fa0c4b2d8be0809ed37babcf839b\r\n$4\r\nport\r\n:31006\r\n$2\r\nip\r\n$9\r\n127.0.'
        b'0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:70\r\n$6\r'
        b'\nhealth\r\n$6\r\nonline\r\n%2\r\n$5\r\nslots\r\n*2\r\n:5461\r\n:10922\r\n$5\r\nnodes\r\n*2\r\n%7\r\n$2\r\nid\r\n$40\r\n4e2'
        b'3d17a7d85453f3c083b08c420f837011c9b45\r\n$4\r\nport\r\n:31002\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoi'
        b'nt\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:70\r\n$6\r\nhealth\r\n$6\r\nonl'
        b'ine\r\n%7\r\n$2\r\nid\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n$4\r\nport\r\n:31004\r\n$2\r\nip\r\n'
        b'$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset'
        b'\r\n:70\r\n$6\r\nhealth\r\n$6\r\nonline\r\n'
    ),
    'online_slots_resp3': (
        b'*3\r\n*4\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:31001\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a002'
        b'5\r\n%0\r\n*4\r\n$9\r\n127.0.0.1\r\n:31006\r\n$40\r\nbf2992a67543fa0c4b2d8be0809ed37babcf839b\r\n%0\r\n*4\r\n:'
        b'5461\r\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:31002\r\n$40\r\n4e23d17a7d85453f3c083b08c420f837011c9b45\r\n%0'
        b'\r\n*4\r\n$9\r\n127.0.0.1\r\n:31004\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n%0\r\n*4\r\n:10923'
        b'\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:31003\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n%0\r\n*4'
        b'\r\n$9\r\n127.0.0.1\r\n:31005\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n%0\r\n'
    ),
    'moved': (
        b'-MOVED 12000 127.0.0.1:31003\r\n'
    ),
    'crossslot': (
        b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    ),
    'ask': (
        b'-ASK 5000 127.0.0.1:31002\r\n'
    ),
    'tryagain': (
        b'-TRYAGAIN Multiple keys request during rehashing of slot\r\n'
    ),
    'ranges_shards': (
        b'*3\r\n*4\r\n$5\r\nslots\r\n*6\r\n:100\r\n:199\r\n:7000\r\n:7000\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\ni'
        b'd\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n$4\r\nport\r\n:31003\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r'
        b'\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:84\r\n$6\r\nheal'
        b'th\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n$4\r\nport\r\n:310'
        b'05\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplic'
        b'ation-offset\r\n:84\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:99\r\n:200\r\n:5460\r\n$5\r\nno'
        b'des\r\n*2\r\n*14\r\n$2\r\nid\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r\n$4\r\nport\r\n:31001\r\n$2\r'
        b'\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-of'
        b'fset\r\n:168\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\nbf2992a67543fa0c4b2d8be0809ed37babcf'
        b'839b\r\n$4\r\nport\r\n:31006\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\n'
        b'replica\r\n$18\r\nreplication-offset\r\n:168\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*4\r\n:5461\r\n'
        b':6999\r\n:7001\r\n:10922\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\nid\r\n$40\r\n4e23d17a7d85453f3c083b08c420f837011'
        b'c9b45\r\n$4\r\nport\r\n:31002\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r'
        b'\nmaster\r\n$18\r\nreplication-offset\r\n:84\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\n6aedfdf5d'
        b'9b1d363255dcf63fad3db398f6c6e17\r\n$4\r\nport\r\n:31004\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9'
        b'\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:84\r\n$6\r\nhealth\r\n$6\r\nonline\r\n'
    ),
    'ranges_slots': (
        b'*7\r\n*4\r\n:0\r\n:99\r\n*4\r\n$9\r\n127.0.0.1\r\n:31001\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r'
        b'\n*0\r\n*4\r\n$9\r\n127.0.0.1\r\n:31006\r\n$40\r\nbf2992a67543fa0c4b2d8be0809ed37babcf839b\r\n*0\r\n*4\r\n:10'
        b'0\r\n:199\r\n*4\r\n$9\r\n127.0.0.1\r\n:31003\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n*0\r\n*4\r'
        b'\n$9\r\n127.0.0.1\r\n:31005\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n*0\r\n*4\r\n:200\r\n:5460'
        b'\r\n*4\r\n$9\r\n127.0.0.1\r\n:31001\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r\n*0\r\n*4\r\n$9\r\n12'
        b'7.0.0.1\r\n:31006\r\n$40\r\nbf2992a67543fa0c4b2d8be0809ed37babcf839b\r\n*0\r\n*4\r\n:5461\r\n:6999\r\n*4\r\n'
        b'$9\r\n127.0.0.1\r\n:31002\r\n$40\r\n4e23d17a7d85453f3c083b08c420f837011c9b45\r\n*0\r\n*4\r\n$9\r\n127.0.0.'
        b'1\r\n:31004\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n*0\r\n*4\r\n:7000\r\n:7000\r\n*4\r\n$9\r\n12'
        b'7.0.0.1\r\n:31003\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n*0\r\n*4\r\n$9\r\n127.0.0.1\r\n:31'
        b'005\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n*0\r\n*4\r\n:7001\r\n:10922\r\n*4\r\n$9\r\n127.0.0'
        b'.1\r\n:31002\r\n$40\r\n4e23d17a7d85453f3c083b08c420f837011c9b45\r\n*0\r\n*4\r\n$9\r\n127.0.0.1\r\n:31004\r\n'
        b'$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n*0\r\n*4\r\n:10923\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n'
        b':31003\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n*0\r\n*4\r\n$9\r\n127.0.0.1\r\n:31005\r\n$40\r'
        b'\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n*0\r\n'
    ),
    'ranges_moved': (
        b'-MOVED 150 127.0.0.1:31003\r\n'
    ),
    'hostname_shards': (
        b'*3\r\n*4\r\n$5\r\nslots\r\n*6\r\n:100\r\n:199\r\n:7000\r\n:7000\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\ni'
        b'd\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n$4\r\nport\r\n:31003\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r'
        b'\n$8\r\nendpoint\r\n$1\r\n?\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:84\r\n$6\r\nhealth\r\n$6\r\n'
        b'online\r\n*14\r\n$2\r\nid\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n$4\r\nport\r\n:31005\r\n$2\r\n'
        b'ip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$1\r\n?\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:8'
        b'4\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:99\r\n:200\r\n:5460\r\n$5\r\nnodes\r\n*2\r\n*16\r\n$2'
        b'\r\nid\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r\n$4\r\nport\r\n:31001\r\n$2\r\nip\r\n$9\r\n127.0.0'
        b'.1\r\n$8\r\nendpoint\r\n$18\r\nnode-31001.example\r\n$8\r\nhostname\r\n$18\r\nnode-31001.example\r\n$4\r\nrole'
        b'\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:168\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\nbf2'
        b'992a67543fa0c4b2d8be0809ed37babcf839b\r\n$4\r\nport\r\n:31006\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoi'
        b'nt\r\n$1\r\n?\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:168\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*'
        b'4\r\n$5\r\nslots\r\n*4\r\n:5461\r\n:6999\r\n:7001\r\n:10922\r\n$5\r\nnodes\r\n*2\r\n*16\r\n$2\r\nid\r\n$40\r\n4e23d17a7d'
        b'85453f3c083b08c420f837011c9b45\r\n$4\r\nport\r\n:31002\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$18'
        b'\r\nnode-31002.example\r\n$8\r\nhostname\r\n$18\r\nnode-31002.example\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nre'
        b'plication-offset\r\n:84\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\n6aedfdf5d9b1d363255dcf63f'
        b'ad3db398f6c6e17\r\n$4\r\nport\r\n:31004\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$1\r\n?\r\n$4\r\nrole\r\n$'
        b'7\r\nreplica\r\n$18\r\nreplication-offset\r\n:84\r\n$6\r\nhealth\r\n$6\r\nonline\r\n'
    ),
    'hostname_slots': (
        b'*7\r\n*4\r\n:0\r\n:99\r\n*4\r\n$18\r\nnode-31001.example\r\n:31001\r\n$40\r\nfe0717047660b35ce89a0d38983c95a'
        b'fe11a0025\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n$1\r\n?\r\n:31006\r\n$40\r\nbf2992a67543fa0c4b2d8be0809e'
        b'd37babcf839b\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n:100\r\n:199\r\n*4\r\n$1\r\n?\r\n:31003\r\n$40\r\n9864bc7bf'
        b'77f7fb778fde523bac1dbe28ca9ffa4\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n$1\r\n?\r\n:31005\r\n$40\r\n25a773'
        b'77ee7f5310e4e3b99d8af8dd9096842226\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n:200\r\n:5460\r\n*4\r\n$18\r\nn'
        b'ode-31001.example\r\n:31001\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r\n*2\r\n$2\r\nip\r\n$9\r\n'
        b'127.0.0.1\r\n*4\r\n$1\r\n?\r\n:31006\r\n$40\r\nbf2992a67543fa0c4b2d8be0809ed37babcf839b\r\n*2\r\n$2\r\nip\r\n$'
        b'9\r\n127.0.0.1\r\n*4\r\n:5461\r\n:6999\r\n*4\r\n$18\r\nnode-31002.example\r\n:31002\r\n$40\r\n4e23d17a7d85453f'
        b'3c083b08c420f837011c9b45\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n$1\r\n?\r\n:31004\r\n$40\r\n6aedfdf5d9b1d'
        b'363255dcf63fad3db398f6c6e17\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n:7000\r\n:7000\r\n*4\r\n$1\r\n?\r\n:3100'
        b'3\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n$1\r\n?\r\n:3'
        b'1005\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n:7001\r'
        b'\n:10922\r\n*4\r\n$18\r\nnode-31002.example\r\n:31002\r\n$40\r\n4e23d17a7d85453f3c083b08c420f837011c9b4'
        b'5\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n$1\r\n?\r\n:31004\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c'
        b'6e17\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n:10923\r\n:16383\r\n*4\r\n$1\r\n?\r\n:31003\r\n$40\r\n9864bc7bf77f7'
        b'fb778fde523bac1dbe28ca9ffa4\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n$1\r\n?\r\n:31005\r\n$40\r\n25a77377ee'
        b'7f5310e4e3b99d8af8dd9096842226\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n'
    ),
    'hostname_moved': (
        b'-MOVED 6000 node-31002.example:31002\r\n'
    ),
    'hostname_moved_unknown': (
        b'-MOVED 12000 ?:31003\r\n'
    ),
    'unknown_shards': (
        b'*3\r\n*4\r\n$5\r\nslots\r\n*6\r\n:100\r\n:199\r\n:7000\r\n:7000\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\ni'
        b'd\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n$4\r\nport\r\n:31003\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r'
        b'\n$8\r\nendpoint\r\n$0\r\n\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:84\r\n$6\r\nhealth\r\n$6\r\no'
        b'nline\r\n*14\r\n$2\r\nid\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n$4\r\nport\r\n:31005\r\n$2\r\ni'
        b'p\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$0\r\n\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:84\r'
        b'\n$6\r\nhealth\r\n$6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:99\r\n:200\r\n:5460\r\n$5\r\nnodes\r\n*2\r\n*16\r\n$2\r\n'
        b'id\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r\n$4\r\nport\r\n:31001\r\n$2\r\nip\r\n$9\r\n127.0.0.1'
        b'\r\n$8\r\nendpoint\r\n$0\r\n\r\n$8\r\nhostname\r\n$18\r\nnode-31001.example\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nre'
        b'plication-offset\r\n:168\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\nbf2992a67543fa0c4b2d8be0'
        b'809ed37babcf839b\r\n$4\r\nport\r\n:31006\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$0\r\n\r\n$4\r\nrole\r\n$'
        b'7\r\nreplica\r\n$18\r\nreplication-offset\r\n:168\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*4\r\n:546'
        b'1\r\n:6999\r\n:7001\r\n:10922\r\n$5\r\nnodes\r\n*2\r\n*16\r\n$2\r\nid\r\n$40\r\n4e23d17a7d85453f3c083b08c420f837'
        b'011c9b45\r\n$4\r\nport\r\n:31002\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$0\r\n\r\n$8\r\nhostname\r\n$18\r\n'
        b'node-31002.example\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:84\r\n$6\r\nhealth\r\n$6\r\non'
        b'line\r\n*14\r\n$2\r\nid\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n$4\r\nport\r\n:31004\r\n$2\r\nip'
        b'\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$0\r\n\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:84\r\n'
        b'$6\r\nhealth\r\n$6\r\nonline\r\n'
    ),
    'unknown_slots': (
        b'*7\r\n*4\r\n:0\r\n:99\r\n*4\r\n$-1\r\n:31001\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r\n*4\r\n$2\r\ni'
        b'p\r\n$9\r\n127.0.0.1\r\n$8\r\nhostname\r\n$18\r\nnode-31001.example\r\n*4\r\n$-1\r\n:31006\r\n$40\r\nbf2992a6754'
        b'3fa0c4b2d8be0809ed37babcf839b\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n:100\r\n:199\r\n*4\r\n$-1\r\n:31003\r'
        b'\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n$-1\r\n:31005'
        b'\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n:200\r\n:546'
        b'0\r\n*4\r\n$-1\r\n:31001\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r\n*4\r\n$2\r\nip\r\n$9\r\n127.0.0'
        b'.1\r\n$8\r\nhostname\r\n$18\r\nnode-31001.example\r\n*4\r\n$-1\r\n:31006\r\n$40\r\nbf2992a67543fa0c4b2d8be08'
        b'09ed37babcf839b\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n:5461\r\n:6999\r\n*4\r\n$-1\r\n:31002\r\n$40\r\n4e23d1'
        b'7a7d85453f3c083b08c420f837011c9b45\r\n*4\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nhostname\r\n$18\r\nnode-310'
        b'02.example\r\n*4\r\n$-1\r\n:31004\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n*2\r\n$2\r\nip\r\n$9'
        b'\r\n127.0.0.1\r\n*4\r\n:7000\r\n:7000\r\n*4\r\n$-1\r\n:31003\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9f'
        b'fa4\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n$-1\r\n:31005\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd909684'
        b'2226\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n:7001\r\n:10922\r\n*4\r\n$-1\r\n:31002\r\n$40\r\n4e23d17a7d85453f'
        b'3c083b08c420f837011c9b45\r\n*4\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nhostname\r\n$18\r\nnode-31002.example'
        b'\r\n*4\r\n$-1\r\n:31004\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.'
        b'1\r\n*4\r\n:10923\r\n:16383\r\n*4\r\n$-1\r\n:31003\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n*2\r'
        b'\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n*4\r\n$-1\r\n:31005\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n*2'
        b'\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n'
    ),
    'unknown_moved': (
        b'-MOVED 12000 :31003\r\n'
    ),
    'replica_fail_shards': (
        b'*3\r\n*4\r\n$5\r\nslots\r\n*6\r\n:100\r\n:199\r\n:7000\r\n:7000\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\ni'
        b'd\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n$4\r\nport\r\n:31003\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r'
        b'\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:84\r\n$6\r\nheal'
        b'th\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n$4\r\nport\r\n:310'
        b'05\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplic'
        b'ation-offset\r\n:84\r\n$6\r\nhealth\r\n$4\r\nfail\r\n*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:99\r\n:200\r\n:5460\r\n$5\r\nnode'
        b's\r\n*2\r\n*16\r\n$2\r\nid\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r\n$4\r\nport\r\n:31001\r\n$2\r\ni'
        b'p\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$8\r\nhostname\r\n$18\r\nnode-31001.example\r\n$4\r\n'
        b'role\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:210\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r'
        b'\nbf2992a67543fa0c4b2d8be0809ed37babcf839b\r\n$4\r\nport\r\n:31006\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nen'
        b'dpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:210\r\n$6\r\nhealth\r\n$'
        b'6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*4\r\n:5461\r\n:6999\r\n:7001\r\n:10922\r\n$5\r\nnodes\r\n*2\r\n*16\r\n$2\r\nid\r\n$40'
        b'\r\n4e23d17a7d85453f3c083b08c420f837011c9b45\r\n$4\r\nport\r\n:31002\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\ne'
        b'ndpoint\r\n$9\r\n127.0.0.1\r\n$8\r\nhostname\r\n$18\r\nnode-31002.example\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\n'
        b'replication-offset\r\n:126\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\n6aedfdf5d9b1d363255dcf'
        b'63fad3db398f6c6e17\r\n$4\r\nport\r\n:31004\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n'
        b'$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:126\r\n$6\r\nhealth\r\n$6\r\nonline\r\n'
    ),
    'replica_fail_slots': (
        b'*7\r\n*4\r\n:0\r\n:99\r\n*4\r\n$9\r\n127.0.0.1\r\n:31001\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r'
        b'\n*2\r\n$8\r\nhostname\r\n$18\r\nnode-31001.example\r\n*4\r\n$9\r\n127.0.0.1\r\n:31006\r\n$40\r\nbf2992a67543fa'
        b'0c4b2d8be0809ed37babcf839b\r\n*0\r\n*3\r\n:100\r\n:199\r\n*4\r\n$9\r\n127.0.0.1\r\n:31003\r\n$40\r\n9864bc7bf7'
        b'7f7fb778fde523bac1dbe28ca9ffa4\r\n*0\r\n*4\r\n:200\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:31001\r\n$40\r\nfe071'
        b'7047660b35ce89a0d38983c95afe11a0025\r\n*2\r\n$8\r\nhostname\r\n$18\r\nnode-31001.example\r\n*4\r\n$9\r\n12'
        b'7.0.0.1\r\n:31006\r\n$40\r\nbf2992a67543fa0c4b2d8be0809ed37babcf839b\r\n*0\r\n*4\r\n:5461\r\n:6999\r\n*4\r\n'
        b'$9\r\n127.0.0.1\r\n:31002\r\n$40\r\n4e23d17a7d85453f3c083b08c420f837011c9b45\r\n*2\r\n$8\r\nhostname\r\n$1'
        b'8\r\nnode-31002.example\r\n*4\r\n$9\r\n127.0.0.1\r\n:31004\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6'
        b'c6e17\r\n*0\r\n*3\r\n:7000\r\n:7000\r\n*4\r\n$9\r\n127.0.0.1\r\n:31003\r\n$40\r\n9864bc7bf77f7fb778fde523bac1d'
        b'be28ca9ffa4\r\n*0\r\n*4\r\n:7001\r\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:31002\r\n$40\r\n4e23d17a7d85453f3c083b'
        b'08c420f837011c9b45\r\n*2\r\n$8\r\nhostname\r\n$18\r\nnode-31002.example\r\n*4\r\n$9\r\n127.0.0.1\r\n:31004\r\n'
        b'$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n*0\r\n*3\r\n:10923\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n'
        b':31003\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n*0\r\n'
    ),
    'failover_shards': (
        b'*4\r\n*4\r\n$5\r\nslots\r\n*6\r\n:100\r\n:199\r\n:7000\r\n:7000\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\ni'
        b'd\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n$4\r\nport\r\n:31003\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r'
        b'\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:84\r\n$6\r\nheal'
        b'th\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n$4\r\nport\r\n:310'
        b'05\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplic'
        b'ation-offset\r\n:84\r\n$6\r\nhealth\r\n$4\r\nfail\r\n*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:99\r\n:200\r\n:5460\r\n$5\r\nnode'
        b's\r\n*2\r\n*16\r\n$2\r\nid\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r\n$4\r\nport\r\n:31001\r\n$2\r\ni'
        b'p\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$8\r\nhostname\r\n$18\r\nnode-31001.example\r\n$4\r\n'
        b'role\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:280\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r'
        b'\nbf2992a67543fa0c4b2d8be0809ed37babcf839b\r\n$4\r\nport\r\n:31006\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nen'
        b'dpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:266\r\n$6\r\nhealth\r\n$'
        b'6\r\nonline\r\n*4\r\n$5\r\nslots\r\n*0\r\n$5\r\nnodes\r\n*1\r\n*16\r\n$2\r\nid\r\n$40\r\n4e23d17a7d85453f3c083b08c42'
        b'0f837011c9b45\r\n$4\r\nport\r\n:31002\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$8\r\nh'
        b'ostname\r\n$18\r\nnode-31002.example\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:126\r\n$6\r'
        b'\nhealth\r\n$4\r\nfail\r\n*4\r\n$5\r\nslots\r\n*4\r\n:5461\r\n:6999\r\n:7001\r\n:10922\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r'
        b'\nid\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n$4\r\nport\r\n:31004\r\n$2\r\nip\r\n$9\r\n127.0.0.'
        b'1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:126\r\n$6\r\nh'
        b'ealth\r\n$6\r\nonline\r\n'
    ),
    'failover_slots': (
        b'*7\r\n*4\r\n:0\r\n:99\r\n*4\r\n$9\r\n127.0.0.1\r\n:31001\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r'
        b'\n*2\r\n$8\r\nhostname\r\n$18\r\nnode-31001.example\r\n*4\r\n$9\r\n127.0.0.1\r\n:31006\r\n$40\r\nbf2992a67543fa'
        b'0c4b2d8be0809ed37babcf839b\r\n*0\r\n*3\r\n:100\r\n:199\r\n*4\r\n$9\r\n127.0.0.1\r\n:31003\r\n$40\r\n9864bc7bf7'
        b'7f7fb778fde523bac1dbe28ca9ffa4\r\n*0\r\n*4\r\n:200\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:31001\r\n$40\r\nfe071'
        b'7047660b35ce89a0d38983c95afe11a0025\r\n*2\r\n$8\r\nhostname\r\n$18\r\nnode-31001.example\r\n*4\r\n$9\r\n12'
        b'7.0.0.1\r\n:31006\r\n$40\r\nbf2992a67543fa0c4b2d8be0809ed37babcf839b\r\n*0\r\n*3\r\n:5461\r\n:6999\r\n*4\r\n'
        b'$9\r\n127.0.0.1\r\n:31004\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n*0\r\n*3\r\n:7000\r\n:7000'
        b'\r\n*4\r\n$9\r\n127.0.0.1\r\n:31003\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n*0\r\n*3\r\n:7001\r'
        b'\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:31004\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n*0\r\n*3\r'
        b'\n:10923\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:31003\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r'
        b'\n*0\r\n'
    ),
    'master_fail_shards': (
        b'*4\r\n*4\r\n$5\r\nslots\r\n*6\r\n:100\r\n:199\r\n:7000\r\n:7000\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*2\r\n*14\r\n$2\r\ni'
        b'd\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n$4\r\nport\r\n:31003\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r'
        b'\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:84\r\n$6\r\nheal'
        b'th\r\n$4\r\nfail\r\n*14\r\n$2\r\nid\r\n$40\r\n25a77377ee7f5310e4e3b99d8af8dd9096842226\r\n$4\r\nport\r\n:31005'
        b'\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplicat'
        b'ion-offset\r\n:84\r\n$6\r\nhealth\r\n$4\r\nfail\r\n*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:99\r\n:200\r\n:5460\r\n$5\r\nnodes\r'
        b'\n*2\r\n*16\r\n$2\r\nid\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r\n$4\r\nport\r\n:31001\r\n$2\r\nip\r'
        b'\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$8\r\nhostname\r\n$18\r\nnode-31001.example\r\n$4\r\nro'
        b'le\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:322\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\nb'
        b'f2992a67543fa0c4b2d8be0809ed37babcf839b\r\n$4\r\nport\r\n:31006\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendp'
        b'oint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:308\r\n$6\r\nhealth\r\n$6\r'
        b'\nonline\r\n*4\r\n$5\r\nslots\r\n*0\r\n$5\r\nnodes\r\n*1\r\n*16\r\n$2\r\nid\r\n$40\r\n4e23d17a7d85453f3c083b08c420f'
        b'837011c9b45\r\n$4\r\nport\r\n:31002\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$8\r\nhos'
        b'tname\r\n$18\r\nnode-31002.example\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:126\r\n$6\r\nh'
        b'ealth\r\n$4\r\nfail\r\n*4\r\n$5\r\nslots\r\n*4\r\n:5461\r\n:6999\r\n:7001\r\n:10922\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\ni'
        b'd\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n$4\r\nport\r\n:31004\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r'
        b'\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:126\r\n$6\r\nhea'
        b'lth\r\n$6\r\nonline\r\n'
    ),
    'master_fail_slots': (
        b'*7\r\n*4\r\n:0\r\n:99\r\n*4\r\n$9\r\n127.0.0.1\r\n:31001\r\n$40\r\nfe0717047660b35ce89a0d38983c95afe11a0025\r'
        b'\n*2\r\n$8\r\nhostname\r\n$18\r\nnode-31001.example\r\n*4\r\n$9\r\n127.0.0.1\r\n:31006\r\n$40\r\nbf2992a67543fa'
        b'0c4b2d8be0809ed37babcf839b\r\n*0\r\n*3\r\n:100\r\n:199\r\n*4\r\n$9\r\n127.0.0.1\r\n:31003\r\n$40\r\n9864bc7bf7'
        b'7f7fb778fde523bac1dbe28ca9ffa4\r\n*0\r\n*4\r\n:200\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:31001\r\n$40\r\nfe071'
        b'7047660b35ce89a0d38983c95afe11a0025\r\n*2\r\n$8\r\nhostname\r\n$18\r\nnode-31001.example\r\n*4\r\n$9\r\n12'
        b'7.0.0.1\r\n:31006\r\n$40\r\nbf2992a67543fa0c4b2d8be0809ed37babcf839b\r\n*0\r\n*3\r\n:5461\r\n:6999\r\n*4\r\n'
        b'$9\r\n127.0.0.1\r\n:31004\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n*0\r\n*3\r\n:7000\r\n:7000'
        b'\r\n*4\r\n$9\r\n127.0.0.1\r\n:31003\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r\n*0\r\n*3\r\n:7001\r'
        b'\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:31004\r\n$40\r\n6aedfdf5d9b1d363255dcf63fad3db398f6c6e17\r\n*0\r\n*3\r'
        b'\n:10923\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:31003\r\n$40\r\n9864bc7bf77f7fb778fde523bac1dbe28ca9ffa4\r'
        b'\n*0\r\n'
    ),
    'master_fail_get': (
        b'-CLUSTERDOWN The cluster is down\r\n'
    ),
}
