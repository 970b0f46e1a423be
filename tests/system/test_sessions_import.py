"""``agent-actors sessions import`` and the messages for a folder without DSH sessions (issue 22,
item 4): real fixtures and damaged copies imported by the real command, then listed by a real
server; ``index`` and ``serve --sessions`` on an empty folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import trio

from actors._serve import READY_LINE
from actors.cli._demo import start_server_process
from actors.session_log import load_session, log_path, scan_frames, session_title
from tests._processes import reap
from wire import open_client

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}

TEXT_TURN = "examples__acp-agent__tests__snapshots__text-turn__session.jsonl"
MULTI_TURN = "examples__acp-agent__tests__snapshots__multi-turn__session.jsonl"
SDK_TURN = "examples__jsonrpc-agent__tests__snapshots__text-turn__session.jsonl"
NO_CWD = "examples__acp-agent__tests__snapshots__handshake__session.jsonl"
#: Its header is fine; upstream's loader rejects its body.
BAD_BODY = "packages__test-support__acp-snapshot__tests__fixtures__suite__plain-turn__session.jsonl"


def agent_actors(*args: str | Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "actors", *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=60)


def header_of(path: Path) -> dict[str, object]:
    record: dict[str, object] = json.loads(path.read_bytes().split(b"\n", 1)[0])
    return record


def copy_fixtures(fixtures: Path, folder: Path, *names: str) -> list[Path]:
    """Copy fixtures into ``folder`` as loose ``<name>/session.jsonl`` files."""
    copies = []
    for name in names:
        target = folder / name.removesuffix(".jsonl") / "session.jsonl"
        target.parent.mkdir(parents=True)
        shutil.copyfile(fixtures / name, target)
        copies.append(target)
    return copies


def placed(data: Path, source: Path) -> Path:
    """Where the import puts ``source``: the server's own layout for its header's cwd and id."""
    record = header_of(source)
    cwd = record.get("cwd")
    return log_path(data / "sessions", cwd if isinstance(cwd, str) else None, str(record["id"]))


async def test_imported_logs_are_listed_and_referenced_by_a_server(
    tmp_path: Path, dsh_fixtures: Path
) -> None:
    """Loose real logs land as zstd logs at their DSH path and read as the originals; a server
    started on the data directory lists them with title and cwd, and offers them as reference
    candidates; a zstd log imported again elsewhere is copied byte for byte."""
    loose = tmp_path / "loose"
    sources = copy_fixtures(dsh_fixtures, loose, TEXT_TURN, MULTI_TURN, SDK_TURN, NO_CWD)
    (loose / "README.md").write_text("not a log: the walk passes it by\n")
    data = tmp_path / "data"
    done = await trio.run_process(
        [sys.executable, "-m", "actors", "sessions", "import", "--data", str(data), str(loose)],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=ENV,
    )
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert out.startswith("imported 4, skipped 0 (already present), refused 0 into ")
    expected = {}
    for source in sources:
        target = placed(data, source)
        original, copy = load_session(source), load_session(target)
        assert copy.compression == "zstd" and copy.header == original.header
        assert copy.captured_through_seq == original.captured_through_seq
        title = session_title(original.events)
        expected[original.header.id] = (original.header.cwd, title.title if title else None)
    assert expected[header_of(sources[0])["id"]][1] == "Reply with exactly the word:"

    process, [address] = await start_server_process(f"ipc://{tmp_path}/server.sock", data)
    try:
        async with open_client(address) as client:
            with trio.fail_after(20):
                page = await client.call("sessions/list", {"limit": 100})
                listed = {
                    row["sessionId"]: (row.get("cwd"), row.get("title")) for row in page["sessions"]
                }
                assert listed == expected
                agent = str(header_of(sources[0])["id"])
                candidates = await client.agent(agent).sessionReferenceResolver.candidates("")
    finally:
        await reap(process)
    offered = {c["sessionId"]: (c.get("cwd"), c["label"]) for c in candidates}
    for session_id in (str(header_of(source)["id"]) for source in sources[1:3]):
        cwd, title = expected[session_id]
        assert offered[session_id] == (cwd, title)

    zstd_log = placed(data, sources[1])
    again = tmp_path / "again"
    done = await trio.run_process(
        [sys.executable, "-m", "actors", "sessions", "import", "--data", str(again), zstd_log],
        capture_stdout=True,
        check=False,
        env=ENV,
    )
    assert done.returncode == 0
    assert placed(again, sources[1]).read_bytes() == zstd_log.read_bytes()


def test_damaged_and_foreign_files_are_refused_with_their_reasons(
    tmp_path: Path, dsh_fixtures: Path
) -> None:
    """A bad header, a garbled committed line, a body upstream rejects, a version-1 header and
    files that are no logs are refused with the reader's reason and exit status 1; the good log
    beside them is imported, and nothing is written for the refused ones."""
    loose = tmp_path / "loose"
    [good, garbled, bad_body, future, no_header] = copy_fixtures(
        dsh_fixtures, loose, TEXT_TURN, MULTI_TURN, BAD_BODY, SDK_TURN, NO_CWD
    )
    lines = garbled.read_bytes().split(b"\n")
    garbled.write_bytes(b"\n".join([*lines[:3], b'{"type":"turn/st', *lines[4:]]))
    header, body = future.read_bytes().split(b"\n", 1)
    future.write_bytes(header.replace(b'"version":0', b'"version":1') + b"\n" + body)
    no_header.write_bytes(b'{"type":"session","version":0,\n' + no_header.read_bytes())
    (loose / "notes.jsonl").write_text('{"hello": "world"}\n')
    text = tmp_path / "notes.txt"
    text.write_text("just some notes\n")
    data = tmp_path / "data"

    done = agent_actors("sessions", "import", "--data", data, loose, text)
    assert done.returncode == 1, done.stderr
    lines_out = done.stdout.splitlines()
    assert lines_out[0].startswith("imported 1, skipped 0 (already present), refused 6 into ")
    reasons = {
        line.split(": ", 1)[0].removeprefix("  refused "): line.split(": ", 1)[1]
        for line in lines_out[1:]
    }
    assert reasons == {
        str(garbled): "corrupt session log: unparsable committed event at line 3",
        str(bad_body): f'stored session "{header_of(bad_body)["id"]}" failed validation: '
        "Error: seed request/header at index 0 lacks provider/model",
        str(future): f'session "{header_of(future)["id"]}" uses log format v1, but this '
        "harness reads only v0: the log was written by a newer harness — upgrade the harness "
        "to open it",
        str(no_header): "corrupt session log: header line is not valid JSON",
        str(loose / "notes.jsonl"): "corrupt session log: first line is not a session header "
        '(record is not an object with type "session")',
        str(text): "corrupt session log: header line is not valid JSON",
    }
    assert placed(data, good).is_file()
    logs = sorted(p.name for p in (data / "sessions").rglob("*") if p.is_file())
    assert logs == ["session.jsonl.zstd"]


def test_duplicates_are_skipped_and_a_torn_tail_is_left_out(
    tmp_path: Path, dsh_fixtures: Path
) -> None:
    """Importing a log again skips it as already imported (exit 0); another log of the same id
    is skipped as already present and the first copy kept; a log cut mid-line is imported
    without its torn tail, as a read sees it."""
    [log] = copy_fixtures(dsh_fixtures, tmp_path / "one", TEXT_TURN)
    data = tmp_path / "data"
    assert agent_actors("sessions", "import", "--data", data, log).returncode == 0
    target = placed(data, log)
    first = target.read_bytes()

    again = agent_actors("sessions", "import", "--data", data, log, log.parent)
    assert again.returncode == 0, again.stderr
    [summary] = again.stdout.splitlines()  # the same file twice is one file
    assert summary.startswith(
        "imported 0, skipped 1 (already present; 1 of them already imported), refused 0 into "
    )

    cut = tmp_path / "cut" / "session.jsonl"
    cut.parent.mkdir()
    whole = log.read_bytes()
    cut.write_bytes(whole[: len(whole) - 20])
    other = agent_actors("sessions", "import", "--data", data, cut)
    assert other.returncode == 0, other.stderr
    assert f"  skipped {cut}: already present ({target})" in other.stdout.splitlines()
    assert target.read_bytes() == first

    fresh = tmp_path / "fresh"
    torn = agent_actors("sessions", "import", "--data", fresh, cut)
    assert torn.returncode == 0, torn.stderr
    last_line = len(whole) - 20 - whole[: len(whole) - 20].rindex(b"\n") - 1
    assert (
        f"  imported {cut}: left out a torn tail of {last_line} bytes (an interrupted write)"
        in torn.stdout.splitlines()
    )
    copy = placed(fresh, cut)
    assert load_session(copy).captured_through_seq == load_session(cut).captured_through_seq
    assert load_session(copy).torn is None
    assert len(scan_frames(copy.read_bytes()).frames) == 2  # the header, then one batch


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    """A path that does not exist, or folders with no log in them, are usage errors."""
    missing = agent_actors("sessions", "import", "--data", tmp_path / "data", tmp_path / "nope")
    assert missing.returncode == 2
    assert missing.stderr == f"agent-actors: {tmp_path / 'nope'}: no such file or directory\n"
    (tmp_path / "empty").mkdir()
    empty = agent_actors("sessions", "import", "--data", tmp_path / "data", tmp_path / "empty")
    assert empty.returncode == 2
    assert "no DSH session logs (*.jsonl, *.jsonl.zstd) found in" in empty.stderr


def test_index_of_a_folder_without_sessions_names_the_layout(
    tmp_path: Path, dsh_fixtures: Path
) -> None:
    """``index --sessions DIR`` on a folder with no DSH transcript in the layout says so, names
    the layout and the import command, and exits 2; ``$DSH_HOME`` given for its ``sessions``
    folder is pointed at it; a folder that does not exist is one line, exit 2."""
    home = tmp_path / "home"
    [loose] = copy_fixtures(dsh_fixtures, home, TEXT_TURN)
    done = agent_actors("index", "--sessions", home, "--data", tmp_path / "data")
    assert done.returncode == 2 and done.stdout == ""
    folder = home.resolve()
    assert done.stderr.splitlines()[:3] == [
        f"agent-actors: no DSH session logs found in {folder}",
        f"  expected: {folder}/--<project key>--/<session id>/session.jsonl.zstd "
        "(or session.jsonl), one directory per cwd and one per session",
        f"  e.g. {folder}/--home-me-app--/0e7c5f2a-9b1d-4c3e-8f6a-2d4b7c9e1f3a/"
        "session.jsonl.zstd for a session whose cwd is /home/me/app (_no-cwd when the header "
        "has no cwd)",
    ]
    assert done.stderr.splitlines()[3] == (
        "hint: to copy loose session.jsonl or .jsonl.zstd files where a server finds them: "
        "agent-actors sessions import [--data DIR] FILE|DIR..."
    )
    assert "did you mean" not in done.stderr

    dsh_home = tmp_path / "dsh-home"
    transcript = log_path(dsh_home / "sessions", "/projects/demo", "s1", "none")
    transcript.parent.mkdir(parents=True)
    shutil.copyfile(loose, transcript)
    pointed = agent_actors("index", "--sessions", dsh_home, "--data", tmp_path / "data")
    assert pointed.returncode == 2
    sessions = (dsh_home / "sessions").resolve()
    assert f"  {sessions} holds DSH session logs: did you mean it?" in pointed.stderr

    missing = agent_actors("index", "--sessions", tmp_path / "nope", "--data", tmp_path / "data")
    assert missing.returncode == 2 and len(missing.stderr.splitlines()) == 1
    assert "no such directory" in missing.stderr


async def test_serve_warns_about_a_folder_without_sessions(tmp_path: Path) -> None:
    """``serve --sessions EMPTY`` prints the same message as a warning on stderr and serves."""
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = [sys.executable, "-m", "actors", "serve", "--endpoint", f"ipc://{tmp_path}/s.sock"]
    argv += ["--data", str(tmp_path / "data"), "--sessions", str(empty)]
    process = await trio.lowlevel.open_process(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        buffer = b""
        with trio.fail_after(30):
            while b"\n" not in buffer:
                chunk = await process.stdout.receive_some(4096)
                assert chunk, "the server exited early"
                buffer += chunk
        line = buffer.decode().split("\n", 1)[0]
        assert line.startswith(READY_LINE)
        async with open_client(line.split()[-1]) as client:
            with trio.fail_after(20):
                assert (await client.call("sessions/list", {}))["sessions"] == []
    finally:
        process.terminate()
        with trio.move_on_after(10, shield=True):
            await process.wait()
    err = b""
    with trio.fail_after(10):
        while chunk := await process.stderr.receive_some(65536):
            err += chunk
    warning = err.decode().splitlines()
    assert "warning" in warning[0].lower()
    assert warning[0].endswith(f"no DSH session logs found in {empty.resolve()}")
    assert warning[1].startswith(f"  expected: {empty.resolve()}/--<project key>--/")
    assert warning[3].startswith("hint: ") and "agent-actors sessions import" in warning[3]
