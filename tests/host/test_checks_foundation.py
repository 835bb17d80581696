"""host.resources on real processes, sockets and directories, and an actor read back from its text. The tables of
facts are in tests/host/test_host_resources.py and tests/net/test_env_launch_vars.py (env.launch_vars)."""
import json
import socket
import subprocess
import sys

from conftest import python_cli
from ports import free_port

from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Actor


def test_resources_names_the_pid_of_a_real_process_holding_the_rendezvous_port(tmp_path, clean_env):
    port = free_port()
    # a multi-line `python -c` script, as crashed runs leave them: its newlines must not reach the pasted fix
    holder = subprocess.Popen([sys.executable, "-c",
                               f"import socket,time\ns=socket.socket()\ns.bind(('0.0.0.0',{port}))\ns.listen()\n"
                               "print('up',flush=True)\ntime.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "up"
        out = tmp_path / "r.json"
        proc = subprocess.run(python_cli("run", "--profile", "cpu", "--master-port", str(port), "--only", "host.resources",
                                         "--json", str(out), "--no-report"), capture_output=True, text=True, timeout=120)
        [result] = json.loads(out.read_text())["results"]
        assert proc.returncode == 1
        assert result["status"] == "fail"
        assert f"port {port} is held by pid {holder.pid}" in result["summary"]
        [kill_line] = [line for line in result["remediation"].splitlines() if f"kill {holder.pid}" in line]
        assert "import socket,time s=socket.socket()" in kill_line  # the whole command line, on the comment line
        assert "\ns.listen()" not in result["remediation"] and "\n" not in result["summary"]
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_port_holders_leaves_out_this_process_own_sockets(clean_env):
    # port_bind's test listener lives in the preflight's own process; run beside it, port_holders named the
    # preflight itself as the leftover to kill (README command 1 went NO-GO on its own Ray worker)
    from dsv3_preflight.host.probes.resources import port_holders

    port = free_port()
    with socket.socket() as own:
        own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        own.bind(("0.0.0.0", port))
        own.listen()
        fact = port_holders.gather(profile=resolve_profile(profile_name="cpu", cli={"master_port": port}), env={})
    assert fact["port"] == port and fact["holders"] == []


def test_the_port_checks_and_the_collective_probe_run_together_without_reporting_each_other(tmp_path, clean_env):
    # the collective probe listens on MASTER_PORT: it runs after the probes that inspect the port
    out = tmp_path / "r.json"
    proc = subprocess.run(python_cli("run", "--profile", "cpu", "--master-port", str(free_port()),
                                     "--only", "host.resources", "--only", "net.port_free", "--only", "dist.allreduce",
                                     "--json", str(out), "--no-report"), capture_output=True, text=True, timeout=180)
    results = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    assert {n: r["status"] for n, r in results.items()} == {
        "host.resources": "pass", "net.port_free": "pass", "dist.allreduce": "pass"}, proc.stdout
    assert results["host.resources"]["evidence"]["port_holders"] == []
    assert proc.returncode == 0


def test_resources_checks_the_room_in_a_real_checkpoint_dir(tmp_path, clean_env):
    out = tmp_path / "r.json"
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    proc = subprocess.run(python_cli("run", "--profile", "cpu", "--only", "host.resources", "--checkpoint-dir", str(ckpt),
                                     "--json", str(out), "--no-report"), capture_output=True, text=True, timeout=120)
    [result] = json.loads(out.read_text())["results"]
    assert result["evidence"]["output_dir"]["writable"] is True
    assert f"checkpoint_dir {ckpt}: " in result["summary"] and "GiB free" in result["summary"]
    assert proc.returncode == 0, proc.stdout
    assert result["status"] == "pass"


def test_an_actor_is_read_back_from_its_label_or_value_and_nothing_else_is_one():
    for actor in Actor:
        assert Actor.from_text(actor.label) is actor and Actor.from_text(f"  {actor.value}\n") is actor
    assert Actor.from_text(None) is None and Actor.from_text("") is None
    assert Actor.from_text("the job") is None   # a label cut short names nobody: the doctor then leaves it unsaid
