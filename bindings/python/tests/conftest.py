"""Fixtures of the petrel package's tests: models converted once per run with the build's
petrel-convert (ctest sets PETREL_CONVERT, PETREL_RUN and the checkpoints' directories,
bindings/python/CMakeLists.txt), and test sentences from the en-de test split; and
times_seen_busy, for the tests that the engine runs without the GIL."""

import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("PETREL_SOURCE_DIR", Path(__file__).resolve().parents[3]))


def times_seen_busy(is_busy, work):
    """How many times another Python thread, polling is_busy() while work() runs, saw it
    true: never, unless work() lets other Python threads run (the engine releases the GIL)."""
    seen = {"busy": 0}
    done = threading.Event()

    def watch():
        while not done.is_set():
            if is_busy():
                seen["busy"] += 1

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        work()
    finally:
        done.set()
        watcher.join()
    return seen["busy"]


def pytest_configure(config):
    config.addinivalue_line("markers", "pip: installs the package with pip into a virtual environment (slow)")


def _tool(variable):
    path = os.environ.get(variable)
    if not path or not os.path.isfile(path):
        pytest.skip(f"{variable} is not set to a built tool (run these tests with ctest)")
    return path


@pytest.fixture(scope="session")
def petrel_run():
    return _tool("PETREL_RUN")


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


def _convert(models_dir, checkpoint, name, *extra):
    output = models_dir / name
    if not output.exists():
        subprocess.run([_tool("PETREL_CONVERT"), str(checkpoint), "-o", str(output), "--quiet", *extra], check=True)
    return str(output)


@pytest.fixture(scope="session")
def en_de_path(models_dir):
    """The en->de Marian checkpoint (tools/en-de-model), int8 as petrel-convert makes it by default."""
    checkpoint = os.environ.get("PETREL_EN_DE_CHECKPOINT", SOURCE_DIR / "tools" / "en-de-model")
    return _convert(models_dir, checkpoint, "en-de.petrel")


@pytest.fixture(scope="session")
def chat_path(models_dir):
    """A tiny Gemma 3 language model with a tokenizer and a chat template (random weights)."""
    checkpoint = os.environ.get("PETREL_CHAT_CHECKPOINT",
                                SOURCE_DIR / "tests" / "fixtures" / "decoder_only" / "gemma3_chat")
    return _convert(models_dir, checkpoint, "chat.petrel")


def _native(models_dir, weights, name):
    """A Marian C++ model as Firefox ships them (tests/fixtures/marian-native/transformer:
    weights, the shared vocab.spm, the binary shortlist), converted."""
    fixture = SOURCE_DIR / "tests" / "fixtures" / "marian-native"
    checkpoint = models_dir / f"{name}-checkpoint"
    checkpoint.mkdir(exist_ok=True)
    for source in (fixture / "transformer" / weights, fixture / "transformer" / "lex.bin", fixture / "vocab.spm"):
        shutil.copyfile(source, checkpoint / source.name)
    return _convert(models_dir, checkpoint, f"{name}.petrel")


@pytest.fixture(scope="session")
def native_path(models_dir):
    return _native(models_dir, "model.bin", "native")


@pytest.fixture(scope="session")
def native_int8_path(models_dir):
    return _native(models_dir, "model.intgemm.alphas.bin", "native-int8")


@pytest.fixture(scope="session")
def en_de(en_de_path):
    import petrel
    return petrel.Model.load(en_de_path)


@pytest.fixture(scope="session")
def chat(chat_path):
    import petrel
    return petrel.Model.load(chat_path)


@pytest.fixture(scope="session")
def sentences():
    """The first sentences of the en-de test split (real text the model was not trained on)."""
    lines = (SOURCE_DIR / "tests" / "fixtures" / "en-de" / "test.en").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip()][:24]
