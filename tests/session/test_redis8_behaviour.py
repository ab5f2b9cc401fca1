"""How the proxy routes Redis 8's command table (issue 52): what the 8.2 snapshot's new tips must not
change. Redis 8 tips CLIENT SETNAME and CLIENT SETINFO `request_policy:all_nodes`; in front of a cluster
they stay the client's own (the proxy answers them), as on 7.0."""

import pytest

from proxy.commands.table import SNAPSHOTS, CommandTable
from proxy.session.behaviour import CLIENT, classify

OLD = CommandTable.from_snapshot(SNAPSHOTS[(7, 0)])
NEW = CommandTable.from_snapshot(SNAPSHOTS[(8, 2)])


@pytest.mark.parametrize("name", sorted(spec.name for spec in NEW.walk() if spec.name.startswith("client|")))
def test_client_subcommands_keep_their_actions_on_8_2(name):
    assert classify(NEW[name]) == CLIENT[name.split("|")[1]]


def test_only_new_commands_and_tipped_admin_commands_change_their_action():
    changed = {spec.name for spec in NEW.walk() if spec.name in OLD and classify(spec) != classify(OLD[spec.name])}
    assert changed == {"acl|deluser", "acl|save", "acl|setuser"}  # now to every master, as their tips say
