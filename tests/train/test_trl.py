"""Exported rows train with TRL's own trainers, offline, on CPU (``make test-train``).

TRL's data utilities accept every row of every format, and one step of
``DPOTrainer``, ``KTOTrainer`` and ``SFTTrainer`` runs on a tiny randomly
initialised ``Qwen2ForCausalLM`` with a tokenizer built here with the
``tokenizers`` library and the vendored Qwen 2.5 chat template. Nothing is
downloaded (the Makefile sets ``HF_HUB_OFFLINE=1``; the network guard of
tests/conftest.py fails any test that tries more than 127.0.0.1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("trl")
pytest.importorskip("torch")

import datasets  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM  # noqa: E402
from trl.data_utils import apply_chat_template, is_conversational, maybe_extract_prompt  # noqa: E402

import ststrace  # noqa: E402
from ststrace import Session  # noqa: E402

TEMPLATE = (Path(__file__).resolve().parent.parent / "fixtures" / "chat_templates" / "qwen2.5.jinja").read_text()
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
CALC = {
    "type": "function",
    "function": {
        "name": "calc",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]},
    },
}


def _rollouts(root: Path) -> Path:
    """Four tasks, three samples each, with rewards that differ within a task."""
    for t, (a, b) in enumerate([(2, 3), (4, 5), (6, 7), (8, 9)]):
        for k in range(3):
            with Session(root, task_id=f"task-{t}", group_id="batch-1", sample=k, id=f"t{t}-s{k}") as s:
                s.tools([CALC])
                s.system("You are a careful calculator. Use the calc tool.")
                s.user(f"What is {a} times {b}?")
                right = k != 1
                (cid,) = s.assistant("", model="m", tool_calls=[{"name": "calc", "arguments": {"expr": f"{a}*{b}" if right else f"{a}+{b}"}}])
                s.tool(cid, str(a * b if right else a + b))
                s.assistant(f"{a} times {b} is {a * b if right else a + b}.", model="m")
                s.outcome(1.0 if right else 0.0, rewards={"correct": float(right), "brevity": 0.1 * k}, labels={"verifier": "exact"}, success=right)
    return root


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("train")
    # The session fixtures of tests/conftest.py are function-scoped: the
    # directory is written here, with the default environment's guard off.
    runs = _rollouts(root / "runs")
    out: dict[str, Path] = {}
    for fmt in ("sft", "rewards", "kto", "dpo"):
        for ext in ("jsonl", "parquet"):
            path = root / f"{fmt}.{ext}"
            ststrace.export(runs, path, format=fmt)
            out[f"{fmt}.{ext}"] = path
    return out


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture(scope="module")
def tokenizer(exported: dict[str, Path]) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained here on the exported text."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    texts = [exported["sft.jsonl"].read_text(), TEMPLATE]
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, chat_template=TEMPLATE, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )


def _model(tokenizer: PreTrainedTokenizerFast) -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    return Qwen2ForCausalLM(config)


def test_the_exports_hold_the_rows_expected(exported: dict[str, Path]) -> None:
    assert len(_jsonl(exported["sft.jsonl"])) == 12
    assert len(_jsonl(exported["rewards.jsonl"])) == 12
    assert len(_jsonl(exported["kto.jsonl"])) == 12
    dpo = _jsonl(exported["dpo.jsonl"])
    assert len(dpo) == 4  # one best-worst pair per task
    assert {r["chosen_reward"] - r["rejected_reward"] for r in dpo} == {1.0}


@pytest.mark.parametrize("fmt", ["sft", "rewards", "kto", "dpo"])
def test_trl_data_utils_accept_every_row(fmt: str, exported: dict[str, Path], tokenizer: PreTrainedTokenizerFast) -> None:
    rows = _jsonl(exported[f"{fmt}.jsonl"])
    assert rows
    for row in rows:
        assert is_conversational(row)
        if fmt == "dpo":
            assert maybe_extract_prompt(row) is row  # the prompt is explicit already
        rendered = apply_chat_template(row, tokenizer, tools=row.get("tools"))
        if fmt in ("sft", "rewards"):
            text = rendered["text"]
            assert "<tool_call>" in text and '"expr"' in text and "<|im_start|>tool" not in text
            assert '"name": "calc"' in text  # the tool schema offered is in the system prompt
        else:
            assert rendered["prompt"].endswith("<|im_start|>assistant\n")
            completions = [rendered["completion"]] if fmt == "kto" else [rendered["chosen"], rendered["rejected"]]
            for text in completions:
                assert "<tool_call>" in text and text.rstrip().endswith("<|im_end|>")


def _args(config_cls: Any, out: Path, **extra: Any) -> Any:
    return config_cls(
        output_dir=str(out), max_steps=1, per_device_train_batch_size=4, learning_rate=1e-3,
        report_to=[], save_strategy="no", logging_steps=1, use_cpu=True, bf16=False, fp16=False,
        dataloader_num_workers=0, seed=0, **extra,
    )


def _trained(trainer: Any, model: Qwen2ForCausalLM, before: dict[str, torch.Tensor]) -> None:
    result = trainer.train()
    assert result.global_step == 1
    loss = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert loss and all(torch.isfinite(torch.tensor(x)) for x in loss)
    changed = [n for n, p in model.named_parameters() if not torch.equal(before[n], p.detach())]
    assert changed, "one optimiser step changed no weight"


def _snapshot(model: Qwen2ForCausalLM) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _dataset(path: Path) -> datasets.Dataset:
    return datasets.load_dataset("parquet", data_files=str(path), split="train", cache_dir=str(path.parent / "hf-cache"))


def test_one_dpo_step(exported: dict[str, Path], tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    from trl import DPOConfig, DPOTrainer

    ds = _dataset(exported["dpo.parquet"])
    assert ds.num_rows == 4 and ds[0]["prompt"][0]["role"] == "system"
    model = _model(tokenizer)
    before = _snapshot(model)
    trainer = DPOTrainer(model=model, ref_model=_model(tokenizer), args=_args(DPOConfig, tmp_path), train_dataset=ds, processing_class=tokenizer)
    _trained(trainer, model, before)


def test_one_kto_step(exported: dict[str, Path], tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    from trl import KTOConfig, KTOTrainer

    ds = _dataset(exported["kto.parquet"])
    assert sorted(ds["label"]) == [False] * 4 + [True] * 8
    model = _model(tokenizer)
    before = _snapshot(model)
    trainer = KTOTrainer(model=model, ref_model=_model(tokenizer), args=_args(KTOConfig, tmp_path), train_dataset=ds, processing_class=tokenizer)
    _trained(trainer, model, before)


def test_one_sft_step_on_reward_filtered_rows(exported: dict[str, Path], tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    """Rejection sampling: the rewards rows of sessions with reward >= 1, as they are."""
    from trl import SFTConfig, SFTTrainer

    out = tmp_path / "best.parquet"
    runs = exported["sft.jsonl"].parent / "runs"
    result = ststrace.export(runs, out, format="rewards", min_reward=1.0)
    assert result.rows == 8 and sum(result.skipped.values()) == 4
    ds = _dataset(out)
    assert set(ds["reward"]) == {1.0}
    model = _model(tokenizer)
    before = _snapshot(model)
    trainer = SFTTrainer(model=model, args=_args(SFTConfig, tmp_path, max_length=512), train_dataset=ds, processing_class=tokenizer)
    _trained(trainer, model, before)


def test_the_docs_trainer_example_runs_offline(tmp_path: Path) -> None:
    """docs/training.md's tiny-model DPO example, as a reader would paste it."""
    from doc_blocks import blocks, run

    (line, code), = [(line, code) for line, code, skip in blocks("training.md") if skip is not None]
    done = run("training.md", line, code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "1"
