"""tools/qafel_probe.py: the QAFeL probe tools' command line, recorded commands, setting and committed runs."""
import json
import sys
from pathlib import Path

import pytest

from afl.repro import qafel as qr
from afl.scoreboard.qafel import LOAD_RUN

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import qafel_channel_ranges  # noqa: E402
import qafel_hidden_state  # noqa: E402
import qafel_late_race  # noqa: E402
import qafel_probe  # noqa: E402
import qafel_server_channel  # noqa: E402
import qafel_start_probe  # noqa: E402
import qafel_target_probe  # noqa: E402

COMMITTED = [(qafel_server_channel, "server-channel/server-channel.json"),
             (qafel_server_channel, "server-channel/lag/server-channel.json"),
             (qafel_server_channel, "server-channel/lag/seed-1/server-channel.json"),
             (qafel_server_channel, "server-channel/lag/seed-2/server-channel.json"),
             (qafel_hidden_state, "hidden-state/hidden-state.json"),
             (qafel_hidden_state, "hidden-state/seed-1/hidden-state.json"),
             (qafel_start_probe, "start-probe/start-probe.json"),
             (qafel_start_probe, "start-probe/residual/start-probe.json"),
             (qafel_start_probe, "start-probe/seeds-1-2/start-probe.json"),
             (qafel_start_probe, "start-probe/seeds-1-2-shuffled/start-probe.json"),
             (qafel_start_probe, "start-probe/seeds-1-2-lag-displacement/start-probe.json"),
             (qafel_channel_ranges, "channel-ranges/channel-ranges.json"),
             (qafel_late_race, "late-race/late-race.json"),
             (qafel_target_probe, "target-probe/target-probe.json")]


def parsed(tool, command: str):
    assert command.startswith(f"python tools/{tool.__name__}.py ")
    return qafel_probe.recorded(tool.arguments(), command)


@pytest.mark.parametrize("tool, path", COMMITTED, ids=[path for _, path in COMMITTED])
def test_a_committed_command_and_the_one_recorded_again_ask_the_same(tool, path):
    args = parsed(tool, json.loads((ROOT / "results/qafel" / path).read_text())["command"])
    again = qafel_probe.command(f"{tool.__name__}.py", tool.arguments(), args)
    assert parsed(tool, again) == args


def test_a_command_names_what_is_set_and_against_and_out_last():
    p = qafel_start_probe.arguments()
    args = p.parse_args(["--out", "o", "--against", "a.json", "b.json", "--seeds", "0", "3", "--starts", "flipped"])
    assert qafel_probe.command("t.py", p, args) == ("python tools/t.py --uploads 40000 --seeds 0 3 --window 5000 "
                                                    "--starts flipped --against a.json b.json --out o")
    args = p.parse_args(["--out", "o", "--quick", "--size", "0.5"])
    assert qafel_probe.command("t.py", p, args) == ("python tools/t.py --quick --uploads 40000 --seeds 0 --window "
                                                    "5000 --starts exact,lagged,displaced --size 0.5 --out o")


def test_a_command_writes_the_results_it_reads_after_out_and_a_reader_takes_no_setting():
    p = qafel_late_race.arguments()
    args = p.parse_args(["--methods", "qafel_c2_s2", "--out", "o", "a.json", "b.json"])
    assert qafel_probe.command("t.py", p, args) == ("python tools/t.py --window 5000 --methods qafel_c2_s2 "
                                                    "--start 20000 --stop 40000 --out o a.json b.json")
    with pytest.raises(SystemExit):
        p.parse_args(["a.json", "--out", "o", "--quick"])


def test_the_setting_is_table_1s_at_the_papers_load_unless_quick():
    p = qafel_probe.parser("", uploads=5000, seeds=[0])
    paper = qafel_probe.setting(p.parse_args(["--out", "o"]), ("qafel_c2_s2",))
    assert paper.target == dict(LOAD_RUN.overrides)["target"] and paper.max_uploads == 5000
    assert paper.users == qr.setting("qafel-table1", quick=False).users
    quick = qafel_probe.setting(p.parse_args(["--out", "o", "--quick"]), ("qafel_c2_s2",), eval_every=7)
    assert quick.target == qr.setting("qafel-table1", quick=True).target and quick.eval_every == 7
    assert quick.methods == ("qafel_c2_s2",)


TABLE_1_ROWS = [(tool, path) for tool, path in COMMITTED if tool in (qafel_server_channel, qafel_hidden_state)]


@pytest.mark.parametrize("tool, path", TABLE_1_ROWS, ids=[path for _, path in TABLE_1_ROWS])
def test_a_committed_setting_begins_with_the_words_for_its_recorded_command(tool, path):
    result = json.loads((ROOT / "results/qafel" / path).read_text())
    args = parsed(tool, result["command"])
    words = qafel_probe.described(args, qafel_probe.setting(args, args.methods))
    assert result["setting"].startswith(words + ", ")
    assert words.startswith("Table 1 (the paper protocol at the 91 % target) on the offline substitute (2,500 users")


def test_committed_runs_are_a_results_runs_or_a_probes_rows_by_method_and_seed(tmp_path):
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"runs": [{"method": "a", "seed": 0, "concurrency": None, "x": 1},
                                          {"method": "a", "seed": 0, "concurrency": 10, "x": 2},
                                          {"method": "b", "seed": 1, "concurrency": None, "x": 3}]}))
    rows = tmp_path / "r.json"
    rows.write_text(json.dumps({"rows": [{"method": "b", "seed": 1, "x": 4}, {"start": "exact", "seed": 0}]}))
    assert {k: r["x"] for k, r in qafel_probe.committed_runs([table]).items()} == {("a", 0): 1, ("b", 1): 3}
    assert {k: r["x"] for k, r in qafel_probe.committed_runs([table, rows]).items()} == {("a", 0): 1, ("b", 1): 4}
    assert list(qafel_probe.committed_runs([table], seeds=[1])) == [("b", 1)]
