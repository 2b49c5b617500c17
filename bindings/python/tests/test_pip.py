"""The README's offline install: a virtual environment over Debian's packages and
`pip install --no-build-isolation ./bindings/python`, with pip forbidden to reach an index.
Marked "pip" (slow: it builds the engine; ccache makes a rebuild quick)."""

import os
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR


@pytest.mark.pip
def test_pip_install_into_a_venv(tmp_path, en_de_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the installed package, not the build tree's
    env["PIP_NO_INDEX"] = "1"  # offline: any download attempt fails the install
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")
    subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "./bindings/python"],
                   cwd=SOURCE_DIR, env=env, check=True)
    script = ("import petrel, sys; m = petrel.Model.load(sys.argv[1]); "
              "t = petrel.Translator(sys.argv[1]); "
              "print(petrel.__file__); print(m.translate('Open the file.', beam_size=1).text); "
              "print(t.translate_batch([m.tokenize('Open the file.').pieces], beam_size=1)[0].hypotheses[0])")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", script, en_de_path], cwd=tmp_path, env=env,
                         check=True, capture_output=True, text=True).stdout.splitlines()
    assert out[0].startswith(str(venv))
    assert out[1] and out[2].startswith("[")
