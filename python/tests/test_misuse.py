"""What a wrong use of the Python API gets: a shardpack exception saying what to do."""

import pickle

import numpy as np
import pytest
from conftest import make_image_folder

import shardpack


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(seed=-1), "seed must be an integer from 0 to 18446744073709551615, not -1"),
        (dict(seed=2**64), "seed must be an integer from 0"),
        (dict(batch_size=2.5), "batch_size must be an integer from 1 to 2147483647, not 2.5"),
        (dict(batch_size=0), "batch_size must be an integer from 1"),
        (dict(output_size=(0, 10)), "output_size height must be an integer from 1 to 65500, not 0"),
        (dict(normalize="cifar"), 'normalize must be "imagenet" \\(the only preset\\)'),
        (dict(normalize=0.5), 'normalize must be "imagenet" or \\(mean, std\\)'),
        (dict(rank=2, world_size=2), "rank must be an integer from 0 to 1, not 2"),
        (dict(shuffle="random"), "shuffle must be one of 'none', 'global', 'block'"),
        (dict(state={"epoch": 3}), "state must be a Loader.state_dict\\(\\)"),
        (dict(state=42), "state must be a Loader.state_dict\\(\\) or its text, not int"),
    ],
)
def test_bad_loader_arguments_raise_invalid_argument_naming_the_fix(dataset_path, kwargs, message):
    with pytest.raises(shardpack.InvalidArgumentError, match=message) as e:
        shardpack.Loader(dataset_path, framework="numpy", **kwargs)
    assert isinstance(e.value, ValueError)  # and the built-in the case calls for


def test_a_transform_error_names_the_transform_as_users_write_it(variable_path):
    with pytest.raises(shardpack.InvalidArgumentError, match='"random_crop" needs a fixed-size'):
        shardpack.Loader(variable_path, framework="numpy", random_crop=True, output_size=8)


def test_bad_convert_arguments_raise_invalid_argument(image_folder, tmp_path):
    for kwargs, message in [
        (dict(size=16, seed=-1), "seed must be an integer from 0"),
        (dict(size=16, shard_size=1.5), "shard_size must be an integer from 1"),
        (dict(size=(0, 16)), "size height must be an integer from 1 to 65500, not 0"),
        (dict(size=16, progress="yes"), "progress must be True, False or a callable"),
    ]:
        with pytest.raises(shardpack.InvalidArgumentError, match=message):
            shardpack.convert(image_folder, tmp_path / "ds", **kwargs)
    assert not (tmp_path / "ds").exists()


def test_dataset_pickles_by_path_and_loader_says_why_it_does_not(dataset_path):
    ds = shardpack.Dataset(dataset_path)
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.path == ds.path and len(copy) == len(ds)
    np.testing.assert_array_equal(copy[7].pixels, ds[7].pixels)
    ld = shardpack.Loader(ds, framework="numpy")
    with pytest.raises(TypeError, match="cannot be pickled.*Pickle its Dataset"):
        pickle.dumps(ld)


def test_convert_progress_true_draws_a_bar(tmp_path, capsys):
    make_image_folder(str(tmp_path / "src"), per_class=3, broken=False)
    s = shardpack.convert(tmp_path / "src", tmp_path / "ds", size=8, progress=True)
    assert s.written == s.inputs
    err = capsys.readouterr().err
    assert f"{s.inputs}/{s.inputs}" in err, err


def test_resume_says_already_complete_only_for_the_same_inputs_and_options(tmp_path):
    make_image_folder(str(tmp_path / "src"), per_class=2, broken=False)
    first = shardpack.convert(tmp_path / "src", tmp_path / "ds", size=8)
    assert not first.already_complete
    again = shardpack.convert(tmp_path / "src", tmp_path / "ds", size=8, resume=True)
    assert again.already_complete and "already complete" in str(again)
    with pytest.raises(shardpack.InvalidArgumentError, match="other options"):
        shardpack.convert(tmp_path / "src", tmp_path / "ds", size=9, resume=True)


def test_an_unserved_url_scheme_is_refused_everywhere_and_nothing_is_written(
    image_folder, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    local_only = "this path must be a local file or directory"
    dataset = "a dataset is a local directory or an http:// or https:// URL"
    for call, message in [
        (lambda: shardpack.convert("s3://bucket/images", tmp_path / "ds", size=16), local_only),
        (lambda: shardpack.convert(image_folder, "https://host/ds", size=16), "a URL cannot be"),
        (lambda: shardpack.Dataset("gs://bucket/ds"), dataset),
        (lambda: shardpack.Loader("hdfs://nn/ds", framework="numpy"), dataset),
        (lambda: shardpack.verify("gs://bucket/ds"), dataset),
        (lambda: shardpack.info("gs://bucket/ds"), dataset),
        (lambda: shardpack.merge("s3://bucket/ds"), local_only),
    ]:
        with pytest.raises(shardpack.InvalidArgumentError, match=message) as e:
            call()
        assert "shardpack does not support the" in str(e.value) or "a URL cannot" in str(e.value)
    assert list(tmp_path.iterdir()) == []
