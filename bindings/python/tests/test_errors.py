"""Engine errors as Python exceptions: petrel.Error with the engine's status and message,
subclasses that are also the built-in exceptions a caller catches."""

import pickle

import pytest

import petrel


def test_missing_file(tmp_path):
    with pytest.raises(petrel.NotFoundError) as raised:
        petrel.Model.load(tmp_path / "missing.petrel")
    error = raised.value
    assert isinstance(error, FileNotFoundError) and isinstance(error, petrel.IoError)
    assert isinstance(error, petrel.Error)
    assert error.status == "Io" and "missing.petrel" in error.message and str(error) == error.message


def test_corrupt_file(tmp_path, en_de_path):
    data = bytearray(open(en_de_path, "rb").read())
    data[8:12] = b"\xff\xff\xff\x7f"  # inside the FlatBuffer's header
    corrupt = tmp_path / "corrupt.petrel"
    corrupt.write_bytes(bytes(data))
    with pytest.raises(petrel.Error) as raised:
        petrel.Model.load(corrupt)
    assert raised.value.status == "Format" and isinstance(raised.value, petrel.FormatError)
    with pytest.raises(petrel.FormatError):
        petrel.Model.from_bytes(b"not a model at all, not at all", name="junk")


def test_ids_out_of_range(en_de):
    with pytest.raises(petrel.InvalidArgumentError) as raised:
        en_de.translate_ids([5, 10 ** 6, 0])
    assert isinstance(raised.value, ValueError) and raised.value.status == "InvalidArgument"
    with pytest.raises(petrel.InvalidArgumentError):
        en_de.translate_ids([5, 2 ** 40, 0])
    with pytest.raises(petrel.InvalidArgumentError):
        en_de.tokens([en_de.info.target_vocab_size])
    with pytest.raises(petrel.InvalidArgumentError):
        en_de.translate("Open the file.", target_prefix=[-1])


def test_bad_options_are_named(en_de):
    with pytest.raises(TypeError, match="'beam'"):
        en_de.translate("Open the file.", beam=4)
    with pytest.raises(TypeError, match="beam_size"):
        en_de.translate("Open the file.", beam_size="4")
    with pytest.raises(ValueError, match="beam_size"):
        en_de.translate("Open the file.", beam_size=-1)
    with pytest.raises(ValueError, match="beam_stop"):
        en_de.translate("Open the file.", beam_stop="sometimes")
    with pytest.raises(petrel.InvalidArgumentError, match="n-best"):
        en_de.translate("Open the file.", beam_size=2, n_best=3)
    with pytest.raises(ValueError, match="target vocabulary"):
        en_de.translate("Open the file.", target_prefix=["not-a-token"])


def test_bad_load_options(en_de_path):
    with pytest.raises(petrel.UnsupportedError, match="isa"):
        petrel.Model.load(en_de_path, isa="no-such-isa")
    with pytest.raises(ValueError, match="activation_scales"):
        petrel.Model.load(en_de_path, activation_scales="static")
    with pytest.raises(ValueError, match="workers"):
        petrel.Model.load(en_de_path, workers=0)


def test_errors_pickle():
    error = petrel.InvalidArgumentError("bad input")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is petrel.InvalidArgumentError and copy.message == "bad input"
