"""GRPO with TRL on CPU, rewarded by the evaluator service (issue 16; docs/integrations.md).

    .venv/bin/python examples/integrations/trl_grpo.py [--steps 2] [--workers 2] [--keep DIR]

What it does, end to end, on this machine:

1. starts a real evaluator service on a free loopback port (uvicorn, a SQLite ledger, the
   pilot 02 harness pool in the sandbox) in a temporary folder;
2. the owner publishes pilot 02's rules in training mode through the owner's port: the bundled
   rules keep pilot 02 in shadow (pilot 10), where every training reward is null by design;
3. builds a tiny GPT-2 (2 layers, 32 wide) and a character tokenizer in memory: no download;
4. trains it with TRL's ``GRPOTrainer`` for ``--steps`` steps.  The policy is scripted: each
   completion's first character picks the candidate it hands in, the honest reference or a
   bundled cheat (``false_ui_success``: a success page with no e-mail sent), so the rewards are
   the harness's real verdicts on real candidates;
5. prints what TRL received per completion (reward, reason, attempt) and the unscorable
   fraction, then checks the ledger.

The reward function is :func:`triz_ri_smart_ai_evaluator.integrations.trl.make_trl_reward`.
Needs the ``trl`` extra and the sandbox (root, bubblewrap, nftables).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import string
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from datasets import Dataset
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer

from triz_ri_smart_ai_evaluator.integrations.trl import make_trl_reward
from triz_ri_smart_ai_evaluator.ledger.log import LOG_VKEY_FILE, check_ledger, load_vkey
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.examples import bundled_candidates
from triz_ri_smart_ai_evaluator.rules.formula import Mode
from triz_ri_smart_ai_evaluator.rules.published import BUNDLED_STORE, RulesStore
from triz_ri_smart_ai_evaluator.rules.versions import canonical_rules
from triz_ri_smart_ai_evaluator.service.client import TrustedClient
from triz_ri_smart_ai_evaluator.service.config import load_principal_key

# the examples' shared helper, next to this file (run as a script, its folder is on sys.path)
from _service import serve  # isort: skip

CHEAT = "false_ui_success"
#: The tokenizer's special tokens: padding, unknown character, end of sequence (ids 0, 1, 2).
SPECIAL = ("[PAD]", "[UNK]", "[EOS]")
PILOT = "pilot_02_feedback_form"
PROMPT = "Fix the feedback form so that a valid submission sends exactly one e-mail:"


def tiny_model() -> tuple[Any, Any]:
    """A 2-layer GPT-2 and a character-level tokenizer, built in memory (nothing downloaded)."""
    chars = string.ascii_letters + string.digits + " .,:-_\n"
    pad, unk, eos = SPECIAL
    vocab = {t: i for i, t in enumerate([*SPECIAL, *chars])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=unk, pad_token=pad,
                                        eos_token=eos)
    config = GPT2Config(vocab_size=len(vocab), n_positions=256, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=2, eos_token_id=2, pad_token_id=0)
    return GPT2LMHeadModel(config), tokenizer


def publish_training_rules(url: str, folder: Path) -> str:
    """The owner publishes pilot 02's rules in force now with mode training, taking effect in
    two seconds, and waits for them (spec 10.5: a version applies to attempts started after
    it takes effect).  Returns the new rules version."""
    _, rules = RulesStore(BUNDLED_STORE).in_force(PILOT, datetime.now(UTC))
    starts = datetime.now(UTC) + timedelta(seconds=2)
    training = rules.model_copy(update={
        "formula": rules.formula.model_copy(update={"mode": Mode.TRAINING}),
        "effective_from": starts})
    with TrustedClient(url, "owner-1", "owner",
                       load_principal_key(folder / "principals" / "owner-1.key")) as owner:
        answer = owner.request("rules_and_benchmarks", "append",
                               {"task_class": json.loads(canonical_rules(training))})
    time.sleep(max(0.0, (starts - datetime.now(UTC)).total_seconds()) + 0.2)
    return str(answer["rules_version"])


def scripted_candidate(_prompt: Any, text: str) -> bytes:
    """The scripted policy: the completion's first character picks the candidate (its code
    point's parity: even -> the honest reference, odd -> a bundled cheat)."""
    by_name = {e.name: e for e in bundled_candidates()}
    honest = not text or ord(text[0]) % 2 == 0
    return by_name["reference" if honest else CHEAT].diff.read_bytes()


def train(url: str, folder: Path, steps: int) -> dict[str, Any]:
    token = json.loads((folder / "credentials.json").read_text())["policy_tokens"]["policy-1"]
    reward = make_trl_reward(url, task_class=PILOT, policy_token=token, trainer_id="trainer-1",
                             trainer_key=folder / "principals" / "trainer-1.key",
                             to_artefact=scripted_candidate, wait_seconds=120)
    model, tokenizer = tiny_model()
    args = GRPOConfig(output_dir=str(folder / "grpo"), max_steps=steps,
                      per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=8, logging_steps=1, report_to=[], use_cpu=True,
                      bf16=False, save_strategy="no", disable_tqdm=True)
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args,
                          train_dataset=Dataset.from_dict({"prompt": [PROMPT] * 8}),
                          processing_class=tokenizer)
    trainer.train()
    # TRL's own record of the last generation batch: what reached the trainer per completion.
    rewards = list(trainer._logs["rewards"][reward.__name__])
    return {
        "steps": trainer.state.global_step,
        "completions": [
            {"attempt_id": a, "reason": r,
             "reward_in_trl": None if math.isnan(v) else v, "advantage": adv}
            for a, r, v, adv in zip(trainer._logs["extra"]["triz_attempt_id"],
                                    trainer._logs["extra"]["triz_reason"], rewards,
                                    trainer._logs["advantages"], strict=True)],
        "log": [{k: v for k, v in h.items() if k.startswith(("reward", "triz", "step"))}
                for h in trainer.state.log_history],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="keep the service folder here")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="trz-grpo-") as tmp:
        folder = args.keep or Path(tmp) / "svc"
        with serve(folder, args.workers) as (url, runtime):
            version = publish_training_rules(url, folder)
            # TRL prints its step logs on stdout: with --json, stdout is the summary alone.
            with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
                summary = train(url, folder, args.steps)
            store = runtime.store

            def verify() -> Any:
                return check_ledger(store, log_key=load_vkey(folder / "keys" / LOG_VKEY_FILE))

            report = runtime.call_sync(verify).to_dict()
            summary["ledger"] = {k: report[k] for k in ("ok", "size", "problems")}
        summary["rules_version"] = version
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{summary['steps']} GRPO steps under pilot 02 rules {version[:12]} (training)")
        for c in summary["completions"]:
            print(f"  {c['attempt_id']}: {c['reason']:<24} reward in TRL "
                  f"{c['reward_in_trl']!s:<6} advantage {c['advantage']:+.3f}")
        print(f"ledger: {summary['ledger']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
