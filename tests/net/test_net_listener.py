"""The listener and the classified TCP reach probe, with real sockets on loopback."""
import errno
import socket
import threading
import time

import pytest
from ports import free_port

from dsv3_preflight.net.probes.listener import BANNER, Listener
from dsv3_preflight.net.probes.reach import tcp_reach
from dsv3_preflight.net.probes.route import interfaces, route_get


def test_listener_serves_its_token_line_and_records_the_peer():
    with Listener(host="127.0.0.1", port=0, deadline_s=10, token="t0k3n") as lst:
        assert lst.port > 0 and lst.token == "t0k3n" and lst.running
        with socket.create_connection(("127.0.0.1", lst.port), timeout=2) as c:
            c.settimeout(2)
            assert c.recv(100) == f"{BANNER} t0k3n\n".encode()
        for _ in range(50):
            if lst.served:
                break
            time.sleep(0.02)
        assert lst.served[0]["peer"] == "127.0.0.1"
    assert not lst.running


def test_listener_generates_a_token_when_none_is_given():
    a, b = Listener(port=0), Listener(port=0)
    assert a.token and a.token != b.token


def test_listener_start_raises_eaddrinuse_when_the_port_is_taken():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        with pytest.raises(OSError) as info:
            Listener(host="127.0.0.1", port=port).start()
        assert info.value.errno == errno.EADDRINUSE


def test_listener_exits_by_itself_after_its_deadline():
    lst = Listener(host="127.0.0.1", port=0, deadline_s=0.5).start()
    assert lst.wait(timeout=5) and not lst.running
    assert tcp_reach("127.0.0.1", lst.port, timeout=1)["outcome"] == "refused"


@pytest.mark.parametrize("kwargs", [{"port": 70000}, {"port": -1}, {"deadline_s": 0}, {"token": "a b"}])
def test_listener_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        Listener(**kwargs)


def test_reach_recognises_our_listener_and_the_token():
    with Listener(host="127.0.0.1", port=0, deadline_s=10, token="abc") as lst:
        ok = tcp_reach("127.0.0.1", lst.port, expected_token="abc")
        wrong = tcp_reach("127.0.0.1", lst.port, expected_token="xyz")
    assert ok["outcome"] == "ok" and ok["listener"] == "ours" and ok["token_match"] is True and ok["latency_ms"] >= 0
    assert wrong["listener"] == "ours" and wrong["token_match"] is False


def test_reach_tells_another_service_from_our_listener():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]

        def answer():
            conn, _ = srv.accept()
            with conn:
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        out = tcp_reach("127.0.0.1", port, timeout=2, read_timeout=1)
        t.join(timeout=2)
    assert out["outcome"] == "ok" and out["listener"] == "other" and out["banner"].startswith("SSH-2.0")


def test_reach_a_silent_service_is_other_after_the_read_timeout():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        out = tcp_reach("127.0.0.1", srv.getsockname()[1], timeout=2, read_timeout=0.3)
    assert out["outcome"] == "ok" and out["listener"] == "other" and out["elapsed_s"] < 2


def test_reach_refused_when_nothing_listens():
    out = tcp_reach("127.0.0.1", free_port(), timeout=2)
    assert out["outcome"] == "refused" and out["errno"] == errno.ECONNREFUSED


def test_reach_name_resolution_failure_is_classified():
    out = tcp_reach("no-such-head.invalid", 39500, timeout=2)
    assert out["outcome"] == "name_resolution" and out["error"]


@pytest.mark.parametrize("port", [0, 70000, -5])
def test_reach_port_out_of_range_is_invalid(port):
    assert tcp_reach("127.0.0.1", port)["outcome"] == "invalid"


def test_reach_ipv6_literal_on_loopback():
    if not any("::1" in i["ipv6"] for i in interfaces()):
        pytest.skip("IPv6 loopback ::1 is not configured on this host")
    with Listener(host="::1", port=0, deadline_s=5, token="six") as lst:
        out = tcp_reach("::1", lst.port, expected_token="six")
    assert out["outcome"] == "ok" and out["token_match"] is True and out["address"] == "::1"


def test_route_get_of_loopback_is_local_on_lo():
    route = route_get("127.0.0.1")
    assert route["error"] is None and route["route_type"] == "local" and route["ifname"] == "lo"
