"""Traces that train (issue 29): task / group / sample on the header, outcomes
(live, ``ststrace.outcome``, ``ststrace outcome`` after the fact), token ids and
logprobs on replies, and the export formats ``rewards``, ``kto`` and ``dpo``.

The trainers themselves run on these rows in tests/train/ (``make test-train``);
here are the shapes, the counts and the file guarantees."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import ststrace
from ststrace import Session
from ststrace._cli import main
from ststrace._cli.tail import Follower
from ststrace.testing import FakeAPI


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


# -- header ------------------------------------------------------------------------------


def test_task_group_and_sample_are_on_the_header_only_when_given(tmp_path: Path) -> None:
    with Session(tmp_path / "a.jsonl", task_id="t-1", group_id=7, sample=2) as s:
        s.user("hi")
    with Session(tmp_path / "b.jsonl") as s:
        s.user("hi")
    header = _lines(tmp_path / "a.jsonl")[0]
    assert (header["taskId"], header["groupId"], header["sample"]) == ("t-1", 7, 2)
    assert not {"taskId", "groupId", "sample"} & set(_lines(tmp_path / "b.jsonl")[0])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"task_id": 1.5}, "task_id must be a string or an int"),
        ({"group_id": True}, "group_id must be a string or an int"),
        ({"task_id": ""}, "task_id must not be empty"),
        ({"sample": "3"}, "sample must be an int"),
    ],
)
def test_bad_task_fields_are_refused_by_name(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Session(tmp_path / "a.jsonl", **kwargs)
    assert not (tmp_path / "a.jsonl").exists()


# -- outcome, live ---------------------------------------------------------------------------


def test_outcomes_merge_key_by_key_and_the_last_value_stands(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with Session(path) as s:
        s.user("fix the bug")
        s.outcome(0.2, rewards={"tests": 0.0, "style": 0.5}, labels={"verifier": "pytest"})
        s.assistant("done", model="m")
        ststrace.outcome(rewards={"tests": 1.0}, success=True)  # the current session
        s.outcome(0.9)
    trace = ststrace.read(path)
    assert trace.outcome == {
        "reward": 0.9,
        "rewards": {"tests": 1.0, "style": 0.5},
        "labels": {"verifier": "pytest"},
        "success": True,
    }
    assert [m["role"] for m in trace.messages] == ["user", "assistant"]
    assert list(ststrace.iter_messages(path)) == trace.messages
    assert ststrace.validate(path) == []


def test_a_trace_without_outcome_reads_as_empty(tmp_path: Path) -> None:
    with Session(tmp_path / "a.jsonl") as s:
        s.user("hi")
    assert ststrace.read(tmp_path / "a.jsonl").outcome == {"reward": None, "rewards": {}, "labels": {}, "success": None}


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (("high",), {}, "reward must be a number"),
        ((float("nan"),), {}, "reward must be a finite number"),
        ((), {"rewards": {"tests": "yes"}}, r"rewards\['tests'\] must be a number"),
        ((), {"labels": {"pr": 1}}, r"labels\['pr'\] must be a string"),
        ((), {"success": 1}, "success must be True or False"),
        ((), {}, "an outcome needs at least one of"),
    ],
)
def test_bad_outcomes_are_refused_by_name(tmp_path: Path, args: tuple[Any, ...], kwargs: dict[str, Any], message: str) -> None:
    with Session(tmp_path / "a.jsonl") as s:
        with pytest.raises(ValueError, match=message):
            s.outcome(*args, **kwargs)
    assert len(_lines(tmp_path / "a.jsonl")) == 1  # nothing written


def test_outcome_outside_a_session_says_how_to_call_it() -> None:
    with pytest.raises(RuntimeError, match=r"outside a session.*ststrace.outcome\(path"):
        ststrace.outcome(1.0)


def test_disabled_sessions_take_outcomes_quietly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STSTRACE_DISABLED", "1")
    with Session(tmp_path) as s:
        s.outcome(1.0)
    assert list(tmp_path.iterdir()) == []


def test_outcome_labels_are_redacted(tmp_path: Path) -> None:
    secret = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
    with Session(tmp_path / "a.jsonl") as s:
        s.user("hi")
        s.outcome(labels={"note": f"token {secret}"})
    ststrace.outcome(tmp_path / "a.jsonl", labels={"later": secret})
    text = (tmp_path / "a.jsonl").read_text()
    assert secret not in text and "[REDACTED" in text


# -- outcome, after the fact -------------------------------------------------------------------


def _closed(path: Path) -> Path:
    with Session(path, id="sess-a", name="weather", harness="my-agent") as s:
        s.system("Be brief.")
        s.user("Weather in Paris?")
        (cid,) = s.assistant("", model="m-1", tool_calls=[{"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}])
        s.tool(cid, "Sunny")
        s.assistant("It is sunny.", model="m-1")
    return path


def test_cli_outcome_appends_without_changing_a_byte(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _closed(tmp_path / "a.jsonl")
    before = path.read_bytes()
    assert main(["outcome", str(path), "--reward", "0.5", "--label", "ci=red", "--failure"]) == 0
    middle = path.read_bytes()
    assert middle.startswith(before) and middle.count(b"\n") == before.count(b"\n") + 1
    assert main(["outcome", str(path), "--reward", "1", "--rewards-json", '{"tests": 1}', "--label", "pr=merged", "--success"]) == 0
    assert path.read_bytes().startswith(middle)
    assert f"outcome set: {path}" in capsys.readouterr().out
    assert ststrace.read(path).outcome == {
        "reward": 1.0,
        "rewards": {"tests": 1.0},
        "labels": {"ci": "red", "pr": "merged"},
        "success": True,
    }
    assert main(["validate", str(path)]) == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "nothing to set"),
        (["--rewards-json", "[1]"], "--rewards-json must be a JSON object"),
        (["--rewards-json", "{"], "--rewards-json is not valid JSON"),
    ],
)
def test_cli_outcome_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    path = _closed(tmp_path / "a.jsonl")
    before = path.read_bytes()
    assert main(["outcome", str(path), *argv]) == 1
    assert message in capsys.readouterr().err
    assert path.read_bytes() == before
    assert main(["outcome", str(path), "--reward", "abc"]) == 2  # argparse
    assert main(["outcome", str(path), "--label", "novalue"]) == 2
    assert main(["outcome", str(path), "--success", "--failure"]) == 2


def test_a_file_a_live_session_holds_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "live.jsonl"
    with Session(path) as s:
        s.user("still running")
        s.flush()
        before = path.read_bytes()
        assert main(["outcome", str(path), "--reward", "1"]) == 1
        (line,) = capsys.readouterr().err.splitlines()
        assert "a live session still holds this file" in line
        with pytest.raises(ValueError, match="a live session still holds"):
            ststrace.outcome(path, 1.0)
        assert path.read_bytes() == before
    assert ststrace.outcome(path, 1.0) == path  # closed now


def test_a_file_another_process_holds_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    code = (
        "import sys\n"
        "from ststrace import Session\n"
        f"with Session({str(path)!r}) as s:\n"
        "    s.user('working'); s.flush()\n"
        "    print('ready', flush=True)\n"
        "    sys.stdin.readline()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        with pytest.raises(ValueError, match="a live session still holds"):
            ststrace.outcome(path, 0.5)
    finally:
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    ststrace.outcome(path, 0.5)
    assert ststrace.read(path).outcome["reward"] == 0.5


def test_torn_files_and_non_traces_are_refused(tmp_path: Path) -> None:
    torn = _closed(tmp_path / "torn.jsonl")
    torn.write_bytes(torn.read_bytes() + b'{"type":"message","mess')
    before = torn.read_bytes()
    with pytest.raises(ValueError, match="last line is not finished"):
        ststrace.outcome(torn, 1.0)
    assert torn.read_bytes() == before
    other = tmp_path / "notes.jsonl"
    other.write_text('{"hello": 1}\n')
    with pytest.raises(ValueError, match="not an STS trace"):
        ststrace.outcome(other, 1.0)
    with pytest.raises(FileNotFoundError, match="no such trace file"):
        ststrace.outcome(tmp_path / "missing.jsonl", 1.0)
    link = tmp_path / "link.jsonl"
    link.symlink_to(_closed(tmp_path / "real.jsonl"))
    with pytest.raises(ValueError, match="symlink"):
        ststrace.outcome(link, 1.0)


def test_validate_checks_outcome_lines(tmp_path: Path) -> None:
    path = _closed(tmp_path / "a.jsonl")
    with open(path, "ab") as f:
        f.write(b'{"type":"outcome","outcome":{"reward":"high","success":1}}\n{"type":"outcome","outcome":[]}\n')
    codes = [(p.line, p.code) for p in ststrace.validate(path)]
    assert codes == [(7, "outcome-invalid"), (7, "outcome-invalid"), (8, "outcome-invalid")]
    assert ststrace.read(path).outcome["reward"] is None  # malformed values are not read


def test_tail_and_convert_skip_outcome_lines(tmp_path: Path) -> None:
    path = _closed(tmp_path / "a.jsonl")
    ststrace.outcome(path, 1.0)
    follower = Follower(path)
    assert [m["role"] for m in follower.poll()] == ["system", "user", "assistant", "tool", "assistant"]
    assert ststrace.detect(path) == "sts"
    out = tmp_path / "copy.jsonl"
    ststrace.write_trace(ststrace.read(path), out)
    assert ststrace.read(out).outcome["reward"] == 1.0


def test_the_hub_loader_reads_the_same_row_with_the_outcome(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("datasets")
    pytest.importorskip("teich")
    import datasets
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_UPDATE_DOWNLOAD_COUNTS", False)
    plain = _closed(tmp_path / "plain" / "a.jsonl")
    scored = tmp_path / "scored" / "a.jsonl"
    scored.parent.mkdir()
    scored.write_bytes(plain.read_bytes())
    ststrace.outcome(scored, 1.0, rewards={"tests": 1.0}, labels={"ci": "green"}, success=True)

    def row(path: Path) -> dict[str, Any]:
        ds = datasets.load_dataset("json", data_files=[str(path)], split="train", cache_dir=str(path.parent / "cache"))
        (r,) = ds
        # `trace` is the file's whole text, `file_path` and `metadata.source_file` its path: all else must match.
        r.pop("trace")
        r.pop("file_path")
        r["metadata"].pop("source_file")
        return dict(r)

    a, b = row(plain), row(scored)
    assert a == b
    assert a["session_id"] == "sess-a" and a["prompt"] == "Weather in Paris?"


# -- token ids and logprobs ------------------------------------------------------------------------


def _replies(path: Path) -> list[dict[str, Any]]:
    return [m for m in ststrace.read(path).messages if m["role"] == "assistant"]


@pytest.mark.parametrize("stream", [False, True])
def test_openai_logprobs_and_vllm_token_ids_when_asked(tmp_path: Path, stream: bool) -> None:
    openai = pytest.importorskip("openai")
    path = tmp_path / "a.jsonl"
    with FakeAPI() as api:
        client = openai.OpenAI(base_url=api.openai_base_url, api_key="k", _strict_response_validation=True)
        ststrace.instrument("openai")
        try:
            with Session(path):
                for extra in ({"logprobs": True}, {"extra_body": {"return_token_ids": True}}, {"logprobs": True, "extra_body": {"return_token_ids": True}}, {}):
                    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{len(extra)}"}], stream=stream, **extra)
                    if stream:
                        for _ in r:
                            pass
            asked = [(q.body.get("logprobs"), q.body.get("return_token_ids")) for q in api.requests]
        finally:
            ststrace.uninstrument("openai")
    # Nothing asked of the provider that the caller did not ask for.
    assert asked == [(True, None), (None, True), (True, True), (None, None)]
    only_lp, only_ids, both, neither = _replies(path)
    assert set(only_lp) & {"logprobs", "tokenIds", "promptTokenIds"} == {"logprobs"}
    assert set(only_ids) & {"logprobs", "tokenIds", "promptTokenIds"} == {"tokenIds", "promptTokenIds"}
    assert not set(neither) & {"logprobs", "tokenIds", "promptTokenIds"}
    assert len(both["tokenIds"]) == len(both["logprobs"]) > 1
    assert all(isinstance(x, float) and x <= 0 for x in both["logprobs"])
    assert all(isinstance(x, int) for x in both["tokenIds"] + both["promptTokenIds"])
    assert ststrace.validate(path) == []


def test_streamed_and_whole_replies_record_the_same_tokens(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    got = []
    for stream in (False, True):
        path = tmp_path / f"{stream}.jsonl"
        with FakeAPI() as api:
            client = openai.OpenAI(base_url=api.openai_base_url, api_key="k")
            ststrace.instrument("openai")
            try:
                with Session(path):
                    r = client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "weather?"}], stream=stream, logprobs=True,
                        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}],
                        extra_body={"return_token_ids": True},
                    )
                    if stream:
                        for _ in r:
                            pass
            finally:
                ststrace.uninstrument("openai")
        (reply,) = _replies(path)
        got.append({k: reply[k] for k in ("tokenIds", "logprobs", "promptTokenIds")})
    assert got[0] == got[1]


def test_tgi_details_on_an_llm_reply(tmp_path: Path) -> None:
    hub = pytest.importorskip("huggingface_hub")
    output = hub.TextGenerationOutput.parse_obj_as_instance(
        {
            "generated_text": "hi",
            "details": {
                "finish_reason": "length",
                "generated_tokens": 2,
                "prefill": [{"id": 1, "logprob": None, "text": "<s>"}],
                "tokens": [{"id": 5, "logprob": -0.5, "special": False, "text": "h"}, {"id": 6, "logprob": -0.25, "special": False, "text": "i"}],
            },
        }
    )

    @ststrace.llm
    def generate(prompt: str) -> Any:
        return output

    with Session(tmp_path / "a.jsonl"):
        generate("say hi")
    (reply,) = _replies(tmp_path / "a.jsonl")
    assert (reply["content"], reply["tokenIds"], reply["logprobs"], reply["promptTokenIds"]) == ("hi", [5, 6], [-0.5, -0.25], [1])


# -- export ----------------------------------------------------------------------------------------


def _rollouts(root: Path) -> Path:
    """Task "add": rewards 1, 0, 0.5; task "mul": 1, 1 (all equal); one session without a task;
    one without an outcome."""
    plan = [("add", 0, 1.0), ("add", 1, 0.0), ("add", 2, 0.5), ("mul", 0, 1.0), ("mul", 1, 1.0)]
    for task, k, reward in plan:
        with Session(root, id=f"{task}-{k}", task_id=task, group_id="g1", sample=k) as s:
            s.system("You are a calculator.")
            s.user(f"{task} 2 3")
            (cid,) = s.assistant("", model="m", tool_calls=[{"id": f"c-{task}-{k}", "name": "calc", "arguments": {"k": k}}])
            s.tool(cid, str(k))
            s.assistant(f"answer {k}", model="m")
            s.outcome(reward, success=reward >= 1.0 if task == "add" else None)
    with Session(root, id="loose") as s:
        s.user("hello")
        s.assistant("hi", model="m")
        s.outcome(0.7)
    with Session(root, id="unscored", task_id="add") as s:
        s.user("add 2 3")
        s.assistant("5", model="m")
    return root


def _export(tmp_path: Path, name: str, **kwargs: Any) -> tuple[Any, list[dict[str, Any]]]:
    out = tmp_path / f"{name}.jsonl"
    result = ststrace.export(tmp_path / "runs", out, **kwargs)
    return result, _lines(out)


def test_dpo_best_worst_pairs_one_row_per_task(tmp_path: Path) -> None:
    _rollouts(tmp_path / "runs")
    result, rows = _export(tmp_path, "dpo", format="dpo")
    (row,) = rows
    assert (row["task_id"], row["chosen_session"], row["rejected_session"]) == ("add", "add-0", "add-1")
    assert (row["chosen_reward"], row["rejected_reward"]) == (1.0, 0.0)
    assert row["prompt"] == [{"role": "system", "content": "You are a calculator."}, {"role": "user", "content": "add 2 3"}]
    assert [m["role"] for m in row["chosen"]] == ["assistant", "tool", "assistant"]
    assert row["chosen"][0]["tool_calls"][0]["function"]["arguments"] == {"k": 0}  # an object
    assert row["rejected"][-1] == {"role": "assistant", "content": "answer 1"}
    assert result.rows == 1
    assert result.skipped == {
        "sessions without a taskId": 1,
        "sessions without a reward": 1,
        "tasks whose sessions' rewards are all equal (or a single session)": 1,
    }


def test_dpo_all_pairs_every_two_sessions_whose_rewards_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _rollouts(tmp_path / "runs")
    assert main(["export", str(tmp_path / "runs"), "-o", str(tmp_path / "all.jsonl"), "--format", "dpo", "--pairs", "all"]) == 0
    assert "exported 3 pairs" in capsys.readouterr().out
    pairs = {(r["chosen_session"], r["rejected_session"]) for r in _lines(tmp_path / "all.jsonl")}
    assert pairs == {("add-0", "add-1"), ("add-0", "add-2"), ("add-2", "add-1")}


def test_kto_labels_from_success_else_the_threshold(tmp_path: Path) -> None:
    _rollouts(tmp_path / "runs")
    result, rows = _export(tmp_path, "kto", format="kto", threshold=0.6)
    labels = {r["session_id"]: r["label"] for r in rows}
    # add: success set (True only for reward 1); mul: reward 1 >= 0.6; loose: 0.7 >= 0.6
    assert labels == {"add-0": True, "add-1": False, "add-2": False, "mul-0": True, "mul-1": True, "loose": True}
    row = next(r for r in rows if r["session_id"] == "add-0")
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert [m["role"] for m in row["completion"]] == ["assistant", "tool", "assistant"]
    assert result.skipped == {"sessions without a reward or success": 1}
    _, strict = _export(tmp_path, "kto-high", format="kto", threshold=0.8)
    assert {r["session_id"]: r["label"] for r in strict}["loose"] is False


def test_rewards_rows_carry_the_outcome_task_and_tokens(tmp_path: Path) -> None:
    runs = _rollouts(tmp_path / "runs")
    with Session(runs, id="tokens", task_id=3, sample=0) as s:
        s.user("hi")
        s.record({"role": "assistant", "content": "yo", "tokenIds": [5, 6], "logprobs": [-0.5, -0.25]})
        s.assistant("bye")
        s.outcome(1.0, rewards={"tests": 1.0}, labels={"ci": "green"})
    result, rows = _export(tmp_path, "rewards", format="rewards")
    row = next(r for r in rows if r["session_id"] == "tokens")
    assert (row["reward"], row["rewards"], row["outcome_labels"], row["task_id"], row["sample"]) == (1.0, {"tests": 1.0}, {"ci": "green"}, "3", 0)
    assert "labels" not in row
    assert row["messages"][1] == {"role": "assistant", "content": "yo", "token_ids": [5, 6], "logprobs": [-0.5, -0.25]}
    assert row["messages"][2] == {"role": "assistant", "content": "bye"}
    add = next(r for r in rows if r["session_id"] == "add-2")
    assert (add["task_id"], add["group_id"], add["sample"], add["reward"]) == ("add", "g1", 2, 0.5)
    assert result.skipped == {"sessions without an outcome": 1}


def test_min_reward_is_rejection_sampling_for_every_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _rollouts(tmp_path / "runs")
    result, rows = _export(tmp_path, "sft", min_reward=0.7)
    assert sorted(r["session_id"] for r in rows) == ["add-0", "loose", "mul-0", "mul-1"]
    assert result.skipped == {"sessions with a reward below 0.7": 2, "sessions without a reward": 1}
    assert main(["export", str(tmp_path / "runs"), "-o", str(tmp_path / "m.jsonl"), "--format", "messages", "--min-reward", "1"]) == 0
    assert len(_lines(tmp_path / "m.jsonl")) == 3
    capsys.readouterr()
    _, kto = _export(tmp_path, "kto", format="kto", min_reward=0.5)
    assert sorted(r["session_id"] for r in kto) == ["add-0", "add-2", "loose", "mul-0", "mul-1"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"format": "ppo"}, "unknown export format 'ppo'"),
        ({"format": "dpo", "pairs": "random"}, "unknown pairing 'random'"),
        ({"min_reward": "high"}, "min_reward must be a number"),
    ],
)
def test_bad_export_arguments(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    _rollouts(tmp_path / "runs")
    with pytest.raises(ValueError, match=message):
        ststrace.export(tmp_path / "runs", tmp_path / "out.jsonl", **kwargs)
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("fmt", ["rewards", "kto", "dpo"])
def test_parquet_holds_the_jsonl_rows(tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyarrow")
    datasets = pytest.importorskip("datasets")
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_UPDATE_DOWNLOAD_COUNTS", False)
    _rollouts(tmp_path / "runs")
    ststrace.export(tmp_path / "runs", tmp_path / "out.parquet", format=fmt)
    _, rows = _export(tmp_path, "out", format=fmt)
    ds = datasets.load_dataset("parquet", data_files=str(tmp_path / "out.parquet"), split="train", cache_dir=str(tmp_path / "cache"))
    assert list(ds) == rows


def test_dpo_reads_back_only_the_sessions_it_pairs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory: the first pass keeps a summary per session; the second reads one task's files at a time."""
    from ststrace import _export

    _rollouts(tmp_path / "runs")
    loads: list[str] = []
    real = _export._load

    def counting(path: Path, *args: Any) -> Any:
        loads.append(path.name)
        return real(path, *args)

    monkeypatch.setattr(_export, "_load", counting)
    result, _ = _export_dpo(tmp_path)
    assert result.rows == 1
    first_pass, second_pass = loads[:7], loads[7:]
    assert sorted(first_pass) == sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert sorted(second_pass) == ["add-0.jsonl", "add-1.jsonl"]


def _export_dpo(tmp_path: Path) -> tuple[Any, list[dict[str, Any]]]:
    return _export(tmp_path, "dpo", format="dpo")


# -- docs/training.md ------------------------------------------------------------------------------


def _doc_blocks() -> list[tuple[int, str, str | None]]:
    from doc_blocks import blocks

    return blocks("training.md")


@pytest.mark.parametrize("line, code", [(line, code) for line, code, skip in _doc_blocks() if skip is None])
def test_docs_training_blocks_run_alone(tmp_path: Path, line: int, code: str) -> None:
    from doc_blocks import run

    done = run("training.md", line, code, tmp_path)
    assert done.returncode == 0, done.stderr


def test_docs_training_skips_only_the_trainer_block() -> None:
    skipped = [(code, skip) for _, code, skip in _doc_blocks() if skip is not None]
    assert len(skipped) == 1 and "DPOTrainer" in skipped[0][0] and "tests/train runs it" in str(skipped[0][1])
