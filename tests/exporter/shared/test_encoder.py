"""The library's sentence encoder (exporter/shared/encoder.py): all-MiniLM-L6-v2 run in numpy, its
files checked against the model as published."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from exporter.shared import encoder
from exporter.shared.encoder import Encoder
from exporter.shared.errors import ExportError


def test_a_published_similarity_comes_out() -> None:
    """sentence-transformers' documentation gives, for all-MiniLM-L6-v2, a cosine of 0.7553
    between these two sentences: the forward pass, pooling and tokenizer here are the
    model's, not an approximation of it."""
    vectors = Encoder.shared().encode(["A man is eating food.",
                                       "A man is eating a piece of bread."])
    assert vectors.dtype == np.float32 and vectors.shape == (2, encoder.DIMENSIONS)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0], abs=1e-5)
    assert float(vectors[0] @ vectors[1]) == pytest.approx(0.7553, abs=5e-4)


def test_a_text_is_encoded_alike_alone_and_in_a_batch() -> None:
    """Texts of different lengths are padded to one length in a batch: the padding is never
    attended to nor pooled, so each text's vector is the one it has alone."""
    texts = ["Cut the knotweed stems in June.",
             "Beavers fell willows and alders close to the water, so guard the trees you "
             "want to keep with wire mesh a metre high, fixed to a stake.",
             "Seeds"]
    together = Encoder.shared().encode(texts)
    alone = np.vstack([Encoder.shared().encode([text]) for text in texts])
    assert np.abs(together - alone).max() < 1e-5


def test_it_reads_past_words_to_meaning() -> None:
    """A question in other words than its answer comes closer to it than to a passage
    about something else that shares one of its words."""
    question, answer, other = Encoder.shared().encode([
        "How can I stop beavers from felling the trees I want to keep?",
        "Protect the trunks of young trees near the bank with wire mesh guards, because "
        "beavers gnaw through willow and alder overnight.",
        "Keep the planting records for at least five years, with the date each tree was "
        "planted."])
    assert float(question @ answer) > float(question @ other) + 0.2


def test_files_other_than_the_published_model_are_refused(tmp_path: Path) -> None:
    """The weights are checked against the model's published SHA-256, whoever packaged
    them: a changed byte is refused with a message, never run."""
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("model.safetensors", "tokenizer.json"):
        shutil.copy(encoder.installed() / name, folder / name)
    assert Encoder.load(folder).encode(["a"]).shape == (1, encoder.DIMENSIONS)
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (folder / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ExportError, match="model.safetensors is not all-MiniLM-L6-v2's"):
        Encoder.load(folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(ExportError, match="cannot read the library's sentence encoder"):
        Encoder.load(folder)


def test_a_sidecar_with_a_library_will_not_start_on_other_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sidecar loads the encoder as it starts when its bundle has a library: files that
    are not the published model stop the start with their message, rather than fail every
    question later with an error 500."""
    from builders import copy_sample

    from exporter.pipeline.build import build
    from exporter.project.config import Project
    from sidecar.store import Store
    root = copy_sample(tmp_path / "node")
    build(Project(root))
    monkeypatch.setattr(Encoder, "_shared", None)
    monkeypatch.setattr(encoder, "MODEL_SHA256", "0" * 64)
    with pytest.raises(ExportError, match="is not all-MiniLM-L6-v2's as published"):
        Store(root / ".fednode" / "bundle")


@pytest.mark.slow
def test_a_library_exported_while_the_sidecar_runs_loads_the_encoder_with_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sidecar started without a library loads the encoder with the first bundle that has
    one, before serving from it: not at the first question, which would take a quarter of a
    second longer than the next (its time telling that nobody had asked before)."""
    import asyncio

    from builders import copy_sample

    from exporter.pipeline.build import build
    from exporter.project.config import Project
    from sidecar.store import Store
    root = copy_sample(tmp_path / "node")
    library = root / "content" / "library"
    aside = tmp_path / "library"
    library.rename(aside)
    build(Project(root))
    monkeypatch.setattr(Encoder, "_shared", None)

    async def run() -> None:
        store = Store(root / ".fednode" / "bundle", reload_interval=0.0)
        assert not (await store.current()).passages and Encoder._shared is None
        aside.rename(library)
        build(Project(root))
        monkeypatch.setattr(Encoder, "_shared", None)  # (the export loaded its own)
        assert (await store.current()).passages
        assert Encoder._shared is not None
    asyncio.run(run())


@pytest.mark.slow
def test_batches_shared_among_processes_make_the_same_vectors() -> None:
    """An export that may fork shares the passages' batches among its cores' processes
    (`encode(processes=...)`): each batch is made as it is alone, so the vectors are those
    one process makes, to the bit, however many share them. (In a process of its own, with
    one thread, as the export command: where threads run, nothing is forked.)"""
    import subprocess
    import sys

    from builders import REPO
    script = (
        "import sys, numpy as np\n"
        "from exporter.pipeline.forks import Aside, forks\n"
        "from exporter.shared.encoder import Encoder\n"
        "assert forks()\n"
        "texts = [('Knotweed grows along rivers. ' * (n % 9 + 1)) + str(n) for n in range(70)]\n"
        "one = Encoder.shared().encode(texts)\n"
        "for processes in (2, 3, 8):\n"
        "    made = Encoder.shared().encode(texts, processes=processes, aside=Aside)\n"
        "    assert np.array_equal(made, one)\n"
        "print('same')\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.stdout == "same\n", done.stderr
