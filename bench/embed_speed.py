"""Embedding the texts an export embeds, with the tokenizer cutting texts into remembered
pieces (what the export does) and, as the reference in the same run, tokenizing each text
whole.

    .venv/bin/python bench/embed_speed.py [--node DIR | --records 100000] [--rounds 3]

The texts are those of every record of the node (`--node`: an exported or unexported
node; else the bundled sample grown to --records with `builders.multiply`), as the search
index makes them. Each measurement is a fresh process (nothing remembered from the one
before), the two ways alternating; it prints each one's wall and CPU seconds, the medians,
and whether the vectors were equal to the bit."""

from __future__ import annotations

import argparse
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.append(str(REPO))  # fednode's own packages, over the tests' folders of those names

from builders import copy_sample, multiply  # noqa: E402

# Run in a fresh process: embed the pickled texts one way, print seconds and a digest.
ONE = """
import gc, hashlib, pickle, sys, time
from exporter.shared.search import WordVectors
texts = pickle.load(open(sys.argv[1], "rb"))
model = WordVectors.load(pieces=sys.argv[2] == "pieces")
gc.disable()  # as in an export
cpu, wall = time.process_time(), time.perf_counter()
vectors = model.embed(texts)
print(time.perf_counter() - wall, time.process_time() - cpu,
      hashlib.sha256(vectors.tobytes()).hexdigest())
"""


def texts_of(root: Path) -> list[str]:
    from exporter.indexing.search_index import _doc
    from exporter.pipeline.build import load
    from exporter.project.config import Project

    content = load(Project(root))
    return [_doc(r, content.collections).embedding_text() for r in content.records]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", type=Path, help="a node (default: build one)")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fednode-embed-") as name:
        folder = Path(name)
        root = args.node
        if root is None:
            root = copy_sample(folder / "node")
            multiply(root / "content", args.records)
        texts = texts_of(root)
        data = folder / "texts.pickle"
        data.write_bytes(pickle.dumps(texts))
        print(f"{len(texts)} texts, {sum(map(len, texts)) / max(len(texts), 1):.0f} "
              f"characters on average")
        figures: dict[str, list[tuple[float, float]]] = {"whole": [], "pieces": []}
        digests = set()
        for _ in range(args.rounds):
            for way in ("whole", "pieces"):
                started = time.perf_counter()
                out = subprocess.run([sys.executable, "-c", ONE, str(data), way], cwd=REPO,
                                     capture_output=True, text=True, check=True).stdout.split()
                wall, cpu, digest = float(out[0]), float(out[1]), out[2]
                figures[way].append((wall, cpu))
                digests.add(digest)
                print(f"  {way:6}  {wall:6.2f} s wall  {cpu:6.2f} s CPU  "
                      f"(process {time.perf_counter() - started:.1f} s)")
        for way, runs in figures.items():
            print(f"{way:6} median {statistics.median(w for w, _ in runs):6.2f} s wall  "
                  f"{statistics.median(c for _, c in runs):6.2f} s CPU")
        print("vectors equal to the bit:", "yes" if len(digests) == 1 else "NO")


if __name__ == "__main__":
    main()
