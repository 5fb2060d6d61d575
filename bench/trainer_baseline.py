"""The Hugging Face `Trainer` baseline, configured like the transformers question-answering example
(the seed's settings): AdamW, linear warmup, fixed batch size, and optionally pad-to-max-length.

Prints one JSON line: samples/s after the warm-up steps and the mean loss over the measured steps.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

COLUMNS = ("input_ids", "token_type_ids", "attention_mask", "start_positions", "end_positions")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--train_dir", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup_measure", type=int, default=5, help="steps excluded from the timing")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--learning_rate", type=float, default=3e-5)
    parser.add_argument("--pad_to_max_length", choices=("true", "false"), default="true")
    parser.add_argument("--group_by_length", choices=("true", "false"), default="false")
    parser.add_argument("--max_seq_length", type=int, default=384)
    args = parser.parse_args()

    import datasets
    from qa.feature_files import read_features
    from transformers import (
        AutoModelForQuestionAnswering,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        default_data_collator,
    )

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForQuestionAnswering.from_pretrained(args.model)
    dataset = datasets.Dataset.from_dict(read_features(args.train_dir, COLUMNS))
    pad_to_max = args.pad_to_max_length == "true"
    if pad_to_max:
        pad = tokenizer.pad_token_id

        def to_max(row):
            missing = args.max_seq_length - len(row["input_ids"])
            return {
                "input_ids": row["input_ids"] + [pad] * missing,
                "token_type_ids": row["token_type_ids"] + [0] * missing,
                "attention_mask": row["attention_mask"] + [0] * missing,
            }

        dataset = dataset.map(to_max)
    times: dict[int, float] = {}
    losses: dict[int, float] = {}

    class Clock(TrainerCallback):
        def on_step_end(self, _args, state, _control, **_kwargs):
            times[state.global_step] = time.perf_counter()

        def on_log(self, _args, state, _control, logs=None, **_kwargs):
            if logs and "loss" in logs:
                losses[state.global_step] = logs["loss"]

    training_args = TrainingArguments(
        output_dir="/tmp/trainer-baseline",
        per_device_train_batch_size=args.batch,
        max_steps=args.steps,
        learning_rate=args.learning_rate,
        warmup_steps=math.ceil(0.1 * args.steps),
        lr_scheduler_type="linear",
        weight_decay=0.01,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=42,
        dataloader_num_workers=0,
        disable_tqdm=True,
        train_sampling_strategy="group_by_length" if args.group_by_length == "true" else "random",
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        data_collator=default_data_collator if pad_to_max else DataCollatorWithPadding(tokenizer),
        callbacks=[Clock()],
    )
    trainer.train()
    measured = args.steps - args.warmup_measure
    elapsed = times[args.steps] - times[args.warmup_measure]
    tail = [losses[s] for s in range(args.warmup_measure + 1, args.steps + 1) if s in losses]
    print(json.dumps({"samples_per_second": measured * args.batch / elapsed, "final_loss": sum(tail) / len(tail)}))


if __name__ == "__main__":
    main()
