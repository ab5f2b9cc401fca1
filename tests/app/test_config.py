"""proxy/config.py: every unknown setting of a configuration file, at any depth, refused at once
with its file, line and the closest known name; the configuration blocks of the README and of
docs/operating.md load."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.config import ConfigError, Limits, known_settings, load_config, unknown_settings
from proxy.yamlcheck import compose

REPO = Path(__file__).resolve().parents[2]

NESTED_TYPOS = """\
listen: 127.0.0.1:7000
limits:
  max_arg: 10
  max_request_bytes: 100
upstream_options: {conect_timeout: 1, warm_spares: 2}
wokers: 2
upstream_sentinel:
  master: mymaster
  sentinels: [127.0.0.1:26379]
  pasword: secret
"""


def write(tmp_path, text):
    path = tmp_path / "guard.yaml"
    path.write_text(text)
    return str(path)


def test_nested_typos_all_at_once(tmp_path):
    path = write(tmp_path, NESTED_TYPOS)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    lines = str(caught.value).splitlines()
    assert lines == [
        f"{path}:3: limits: unknown setting 'max_arg' (did you mean max_args?)",
        f"{path}:5: upstream_options: unknown setting 'conect_timeout' (did you mean connect_timeout?)",
        f"{path}:6: unknown setting 'wokers' (did you mean workers?)",
        f"{path}:10: upstream_sentinel: unknown setting 'pasword' (did you mean password?)",
    ]


def test_unknown_without_a_close_name_lists_the_known(tmp_path):
    path = write(tmp_path, "limits:\n  colour: red\n")
    with pytest.raises(ConfigError, match=r":2: limits: unknown setting 'colour' \(expected one of: .*max_args"):
        load_config(path)


def test_known_settings_follow_what_the_loader_reads():
    known = known_settings()
    assert {f for f in Limits.__dataclass_fields__} <= known[("limits",)]
    assert {"connect_timeout", "shared_connections", "warm_spares", "failover_timeout",
            "read_from_replicas"} <= known[("upstream_options",)]
    assert {"upstream", "policy", "limits", "upstream_options", "workers"} <= known[()]
    assert "max_arg" not in known[("limits",)]


def test_valid_file_and_yaml_mistake(tmp_path):
    config = load_config(write(tmp_path, "limits: {max_args: 10}\nupstream_options: {connect_timeout: 1}\n"))
    assert config.limits.max_args == 10 and config.connect_timeout == 1.0
    path = write(tmp_path, "limits:\n  max_args: 10\n   max_request_bytes: 5\n")
    with pytest.raises(ConfigError, match=rf"{re.escape(path)}:3: invalid YAML"):
        load_config(path)


@pytest.mark.parametrize("doc, heading", [("README.md", "## Configuration"), ("docs/operating.md", "## Settings")])
def test_documented_configuration_block_names_known_settings(doc, heading):
    text = (REPO / doc).read_text()
    block = text.split(heading, 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert unknown_settings(compose(block), doc) == []
    assert unknown_settings(compose(block + "limits: {max_arg: 1}\n"), doc)


def test_cli_exits_non_zero_with_every_typo(tmp_path):
    path = write(tmp_path, NESTED_TYPOS)
    done = subprocess.run([sys.executable, "-m", "proxy", "serve", "--config", path], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    for line, word in ((3, "max_args"), (5, "connect_timeout"), (6, "workers"), (10, "password")):
        assert f"{path}:{line}: " in done.stderr and f"did you mean {word}?" in done.stderr


def test_a_yaml_merge_key_is_checked_as_if_written_in_place(tmp_path):
    config = load_config(write(tmp_path, "limits:\n  <<: {max_args: 5}\n  max_request_bytes: 10\n"))
    assert config.limits.max_args == 5
    path = write(tmp_path, "limits:\n  <<: {max_arg: 5}\n")
    with pytest.raises(ConfigError, match=r":2: limits: unknown setting 'max_arg' \(did you mean max_args\?\)"):
        load_config(path)


def test_tls_sections_are_checked_with_the_rest(tmp_path):
    path = write(tmp_path, "tls:\n  cert_fil: a\n  key_file: b\nupstream_tls:\n  verfy: false\nlimits:\n  max_memry: 5\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).splitlines() == [
        f"{path}:2: tls: unknown setting 'cert_fil' (did you mean cert_file?)",
        f"{path}:5: upstream_tls: unknown setting 'verfy' (did you mean verify?)",
        f"{path}:7: limits: unknown setting 'max_memry' (did you mean max_memory?)",
    ]


def test_face_setting(tmp_path):
    assert load_config(write(tmp_path, "upstream_cluster: 127.0.0.1:7000\nface: cluster\n")).face == "cluster"
    assert load_config(write(tmp_path, "upstream: redis://127.0.0.1:6390\n")).face == "standalone"
    assert "face" in known_settings()[()]
    with pytest.raises(ConfigError, match="'face' must be standalone or cluster, got 'clustre'"):
        load_config(write(tmp_path, "face: clustre\n"))
    with pytest.raises(ConfigError, match=r"unknown setting 'faces' \(did you mean face\?\)"):
        load_config(write(tmp_path, "faces: cluster\n"))


def test_eval_scripts_memory(tmp_path):
    assert load_config(write(tmp_path, "policy: none\n")).eval_scripts_memory == 4 << 20
    assert "eval_scripts_memory" in known_settings()[("upstream_options",)]
    config = load_config(write(tmp_path, "upstream_options: {eval_scripts_memory: 0}\n"))
    assert config.eval_scripts_memory == 0  # none kept
    for bad in ("-1", "1.5", "yes"):
        with pytest.raises(ConfigError, match="eval_scripts_memory"):
            load_config(write(tmp_path, f"upstream_options: {{eval_scripts_memory: {bad}}}\n"))
