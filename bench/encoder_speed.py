"""The library's sentence encoder (exporter/shared/encoder.py) on the bundled sample's passages:
CPU a passage, and as the reference in the same run, the CPU numpy takes for the same
model's matrix products alone (each layer's four, on arrays of each batch's shape), the
floor any numpy forward pass of it has on this machine.

    .venv/bin/python bench/encoder_speed.py [--rounds 3]

The passages are those an export of the sample makes (`exporter.library.documents.passages`)."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
sys.path.append(str(REPO))  # fednode's own packages, over the tests' folders of those names

from builders import copy_sample  # noqa: E402
from timing import reference_loop  # noqa: E402


def sample_passages() -> list[str]:
    from exporter.library import documents as library
    from exporter.pipeline.build import load
    from exporter.project.config import Project

    with tempfile.TemporaryDirectory(prefix="fednode-encoder-") as name:
        root = copy_sample(Path(name) / "node")
        project = Project(root)
        content = load(project)
        documents, _ = library.documents(root, content.records, project.cache)
        return [text for document in documents for page in document.pages
                for text, _ in library.passages(page)]


def products_only(encoder: object, texts: list[str]) -> None:
    """The matrix products of the forward pass, nothing else, batch by batch as `encode`
    makes them."""
    from exporter.shared.encoder import BATCH, HEADS

    ids = [e.ids for e in encoder.tokenizer.encode_batch(texts)]  # type: ignore[attr-defined]
    ids.sort(key=len)
    for start in range(0, len(ids), BATCH):
        chosen = ids[start:start + BATCH]
        count, length = len(chosen), max(map(len, chosen))
        x = np.ones((count, length, 384), np.float32)
        for qkv, _, out_w, _, _, _, up_w, _, down_w, _, _, _ in encoder._layers:  # type: ignore[attr-defined]
            q = (x @ qkv).reshape(count, length, 3 * HEADS, 32).transpose(0, 2, 1, 3)
            scores = q[:, :HEADS] @ q[:, HEADS:2 * HEADS].transpose(0, 1, 3, 2)
            context = (scores @ q[:, 2 * HEADS:]).transpose(0, 2, 1, 3).reshape(count, length, 384)
            (context @ out_w @ up_w) @ down_w


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    from exporter.shared.encoder import Encoder

    texts = sample_passages()
    encoder = Encoder.shared()
    print(f"{len(texts)} passages of the sample; reference loop {reference_loop():.2f} s")
    ours, floor = [], []
    for _ in range(args.rounds):
        started = time.process_time()
        encoder.encode(texts)
        ours.append((time.process_time() - started) / len(texts))
        started = time.process_time()
        with threadpool_limits(1, user_api="blas"):
            products_only(encoder, texts)
        floor.append((time.process_time() - started) / len(texts))
    print(f"encoder: {statistics.median(ours) * 1000:.1f} ms of CPU a passage "
          f"(median of {args.rounds}); its matrix products alone: "
          f"{statistics.median(floor) * 1000:.1f} ms")
    print(f"reference loop after: {reference_loop():.2f} s")


if __name__ == "__main__":
    main()
