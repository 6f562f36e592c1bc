"""``route --file --ray`` and ``eval --ray`` on a local Ray cluster: the same output as the single-process run,
in input order; and Ray stays off the default path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from routegate.cli import main
from routegate.errors import ConfigurationError

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

DATA = Path(__file__).resolve().parents[1] / "data"
TRAIN, VAL, TEST = (DATA / f"clinc150_subset_{s}.jsonl" for s in ("train", "val", "test"))


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().out


def test_route_file_on_ray_is_byte_for_byte_the_plain_output(
    ray_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(tmp_path / "data"))
    queries = tmp_path / "queries.jsonl"
    lines = (DATA / "support_routes.jsonl").read_text(encoding="utf-8").splitlines()
    # a few hundred rows, duplicates included, so that batches of several actors interleave
    rows = lines + [json.dumps({"text": f"status of ticket {i}"}) for i in range(60)] + lines[:40]
    queries.write_text("\n".join(rows) + "\n", encoding="utf-8")

    plain = _run(capsys, ["route", "--file", str(queries)])
    on_ray = _run(capsys, ["route", "--file", str(queries), "--ray", "--ray-actors", "2"])

    assert on_ray == plain
    assert len(on_ray.splitlines()) == len(rows)
    assert [json.loads(line)["text"] for line in on_ray.splitlines()] == [json.loads(r)["text"] for r in rows]


def test_eval_on_ray_reports_the_same_except_latency(
    ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    router = tmp_path / "router"
    assert main(["fit", "--train", str(TRAIN), "--val", str(VAL), "-o", str(router), "--no-progress"]) == 0
    argv = ["eval", str(TEST), "--router", str(router), "--json", "--no-progress"]

    plain = json.loads(_run(capsys, argv))
    on_ray = json.loads(_run(capsys, [*argv, "--ray", "--ray-actors", "2"]))

    for report in (plain, on_ray):
        assert report.pop("latency_ms_p50") >= 0
        assert report.pop("latency_ms_p99") >= 0
    assert on_ray == plain
    assert on_ray["n"] == len(TEST.read_text().splitlines())


def test_map_in_order_keeps_input_order_across_actors(ray_cluster: Any) -> None:
    from routegate.routers.ray_batch import map_in_order

    def make_worker() -> Any:
        import os

        return lambda items: [(item * 2, os.getpid()) for item in items]

    seen: list[tuple[int, int]] = []
    results = list(
        map_in_order(list(range(300)), make_worker, batch_size=16, actors=2, progress=lambda d, t: seen.append((d, t)))
    )

    assert [value for value, _ in results] == [2 * i for i in range(300)]
    assert seen[-1] == (300, 300)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_a_failing_worker_is_an_error_not_a_partial_output(ray_cluster: Any) -> None:
    from routegate.routers.ray_batch import map_in_order

    def make_worker() -> Any:
        def work(items: list[int]) -> list[int]:
            if 7 in items:
                raise ValueError("row 7 is bad")
            return items

        return work

    with pytest.raises(Exception, match="row 7 is bad"):
        list(map_in_order(list(range(20)), make_worker, batch_size=4, actors=1))


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from routegate.routers import ray_batch

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError, as without the extra
    with pytest.raises(ConfigurationError, match=r"pip install 'routegate\[ray\]'"):
        ray_batch.import_ray()


def test_ray_is_not_imported_on_the_default_path(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from routegate.cli import main\n"
        "try:\n    main(['route', '--help'])\nexcept SystemExit:\n    pass\n"
        "main(['route', 'where is ticket 4', '--json'])\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"ROUTEGATE_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert "--ray" in done.stdout
    assert '"route"' in done.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--ray", "--replicas", "2"],
        ["route", "--file", str(DATA / "support_routes.jsonl"), "--ray"],
        ["eval", str(TEST), "--router", "no-such-router", "--ray"],
    ],
)
def test_every_ray_option_without_the_extra_says_what_to_install(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(tmp_path))
    monkeypatch.setitem(sys.modules, "ray", None)  # as without the extra
    code = main(argv)
    err = capsys.readouterr().err
    assert code != 0
    assert "pip install 'routegate[ray]'" in err, err
    assert not list(tmp_path.glob("**/postmaster.pid"))  # no database was started for nothing


@given(st.text(max_size=20))
def test_autoscale_accepts_min_max_or_says_what_is_wrong(text: str) -> None:
    from routegate.cli._ray_serve import parse_autoscale

    refusal = ""
    try:
        low, high = parse_autoscale(text)
    except ConfigurationError as exc:
        refusal = str(exc)
    if refusal:
        assert "MIN:MAX" in refusal
        assert repr(text) in refusal
    else:
        assert 1 <= low <= high
        assert text.partition(":")[1] == ":"
