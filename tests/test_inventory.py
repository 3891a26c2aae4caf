"""Hosts files and hostlists: what parses, what is refused, and the message that names the line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from preflight.errors import InputError
from preflight.inventory import (
    build_inventory,
    load_ssh_config,
    parse_hosts,
    parse_nodelist,
    read_hosts_file,
)


def parse(text: str) -> list[tuple[str, str, str | None, int, int | None]]:
    return [
        (h.name, h.address, h.user, h.port, h.slots)
        for h in parse_hosts(text.splitlines(), source="hosts.txt")
    ]


def test_plain_names_users_ports_and_slots() -> None:
    assert parse("gpu01\nroot@gpu02:2222 slots=8\n10.0.0.3 slots=4\n") == [
        ("gpu01", "gpu01", None, 22, None),
        ("gpu02:2222", "gpu02", "root", 2222, 8),
        ("10.0.0.3", "10.0.0.3", None, 22, 4),
    ]


def test_comments_and_blank_lines_are_ignored() -> None:
    assert parse("# the rack\n\n   \ngpu01  # first node\n\t\n") == [("gpu01", "gpu01", None, 22, None)]


def test_hostlist_ranges_expand_in_order() -> None:
    names = [h[0] for h in parse("gpu[01-03,10] slots=8\nlogin")]
    assert names == ["gpu01", "gpu02", "gpu03", "gpu10", "login"]


def test_ipv6_with_and_without_port() -> None:
    assert parse("[fe80::1]:2222\nfd00::5\nops@[::1]") == [
        ("[fe80::1]:2222", "fe80::1", None, 2222, None),
        ("fd00::5", "fd00::5", None, 22, None),
        ("::1", "::1", "ops", 22, None),
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("gpu01:99999", "port '99999' is not a number from 1 to 65535"),
        ("gpu01:", "port '' is not a number"),
        ("gpu01 slots=0", "slots must be a whole number of at least 1"),
        ("gpu01 slots=eight", "slots must be a whole number"),
        ("gpu01 gpus=8", "unknown option 'gpus=8'"),
        ("gpu[01-", "bad hostlist 'gpu[01-'"),
        ("gpu[05-01]", "bad hostlist"),
        ("bad user@gpu01", "unknown option 'user@gpu01'"),
        ("a b@gpu01", "unknown option"),
        ("gpu01:22:33", "not an address; write IPv6 with a port as [addr]:port"),
        ("[gpu01]:22", "is not an [IPv6] address"),
        ("gpu01;rm -rf /", "is not a host name"),
        ("-oProxyCommand=sh", "is not a host name"),
        ("-gpu01", "is not a valid host name"),
        ("@gpu01", "'' is not a valid user name"),
    ],
)
def test_malformed_lines_name_the_file_and_line(line: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_hosts(["gpu00", "# ok", line], source="hosts.txt")
    assert str(caught.value).startswith("hosts.txt:3: ")
    assert message in str(caught.value)


def test_duplicate_hosts_name_both_lines() -> None:
    with pytest.raises(InputError, match=r"^hosts.txt:3: duplicate host gpu02 \(first on line 1\)"):
        parse_hosts(["gpu[01-02]", "gpu03", "gpu02"], source="hosts.txt")


def test_same_host_on_another_port_is_another_host() -> None:
    assert [h.name for h in parse_hosts(["localhost:2201", "localhost:2202"], source="h")] == [
        "localhost:2201",
        "localhost:2202",
    ]


def test_an_empty_hosts_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "hosts.txt"
    path.write_text("# nothing yet\n")
    with pytest.raises(InputError, match=r"hosts\.txt: the hosts file names no host"):
        read_hosts_file(path)


def test_a_hosts_file_saved_with_a_byte_order_mark_reads_as_without(tmp_path: Path) -> None:
    path = tmp_path / "hosts.txt"
    path.write_bytes("\ufeffgpu01 slots=8\r\ngpu02 slots=8\r\n".encode())
    assert [(h.name, h.slots) for h in read_hosts_file(path)] == [("gpu01", 8), ("gpu02", 8)]


def test_a_missing_hosts_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.txt: no such hosts file"):
        read_hosts_file(tmp_path / "nope.txt")


def test_slurm_nodelist_expression() -> None:
    assert [h.name for h in parse_nodelist("gpu[01-02,07],login1")] == ["gpu01", "gpu02", "gpu07", "login1"]


def test_ssh_config_supplies_hostname_user_port_identity_and_jump(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        "Host gpu*\n  HostName %h.cluster.internal\n  User train\n  Port 2200\n"
        "  IdentityFile ~/.ssh/cluster\n  ProxyJump bastion\n"
        "Host bastion\n  HostName 192.0.2.1\n"
    )
    hosts = build_inventory(parse_hosts(["gpu01", "ops@gpu02:22"], source="h"), load_ssh_config(config))
    first, second = hosts
    assert (first.address, first.user, first.port, first.proxy_jump) == (
        "gpu01.cluster.internal",
        "train",
        2200,
        "bastion",
    )
    assert first.identity_files[0].endswith("/.ssh/cluster")
    # What the hosts file says wins; port 22 written explicitly is the default, so config still applies.
    assert second.user == "ops"


def test_two_names_for_one_endpoint_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("Host alias\n  HostName gpu01\n")
    with pytest.raises(InputError, match="alias reaches the same node as gpu01"):
        build_inventory(parse_hosts(["gpu01", "alias"], source="h"), load_ssh_config(config))


@given(st.text(max_size=80))
def test_any_line_parses_or_gives_a_one_line_error(line: str) -> None:
    try:
        parse_hosts([line], source="hosts.txt")
    except InputError as exc:
        text = str(exc)
        assert text.startswith("hosts.txt:1: ")
        assert "\n" not in text.rstrip("\n") or "\n" in line


@given(
    st.lists(
        st.from_regex(r"[a-z][a-z0-9-]{0,10}[0-9]", fullmatch=True), min_size=1, max_size=20, unique=True
    )
)
def test_every_listed_host_comes_back_once(names: list[str]) -> None:
    assert [h.name for h in parse_hosts(names, source="h")] == names
