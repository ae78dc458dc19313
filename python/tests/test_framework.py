"""framework="auto": the loader delivers torch tensors where PyTorch imports, and NumPy
arrays where none of torch, TensorFlow and JAX does (tests/test_jax.py and
tests/interop/test_tf_loader.py check the two between); `import shardpack` needs no
framework at all."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import shardpack


def run_without_module(modules, code):
    """Runs `code` in a fresh interpreter where `import <module>` fails for each of
    `modules` (a name or a tuple), as where those packages are not installed; returns its
    stdout."""
    modules = (modules,) if isinstance(modules, str) else modules
    script = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
    script += textwrap.dedent(code)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def run_without_torch(code):
    return run_without_module("torch", code)


def test_without_any_framework_auto_delivers_numpy_and_says_so(dataset_path):
    out = run_without_module(("torch", "tensorflow", "jax"), f"""
        import numpy as np
        import shardpack
        ld = shardpack.Loader({dataset_path!r}, batch_size=8, shuffle="none")
        images, labels = next(iter(ld))
        assert type(images) is np.ndarray and type(labels) is np.ndarray, type(images)
        assert images.shape == (8, 3, 32, 32), images.shape
        assert ld.framework == "numpy"
        assert "framework='numpy'" in repr(ld), repr(ld)
        # The same bytes as asking for NumPy by name.
        named = shardpack.Loader({dataset_path!r}, batch_size=8, shuffle="none",
                                 framework="numpy")
        assert np.array_equal(next(iter(named))[0], images)
        print("ok")
    """)
    assert out.strip() == "ok"


def test_without_torch_a_named_torch_or_a_gpu_device_says_what_to_install(dataset_path):
    out = run_without_torch(f"""
        import shardpack
        for kwargs in ({{"framework": "torch"}}, {{"device": "cuda:0"}}):
            try:
                shardpack.Loader({dataset_path!r}, **kwargs)
            except ImportError as e:
                assert "torch" in str(e), str(e)
                print("ImportError")
    """)
    assert out.split() == ["ImportError", "ImportError"]


def test_with_torch_auto_delivers_torch_tensors(dataset_path):
    torch = pytest.importorskip("torch")
    ld = shardpack.Loader(dataset_path, batch_size=8, shuffle="none")
    images, labels = next(iter(ld))
    assert ld.framework == "torch" and "framework='torch'" in repr(ld)
    assert isinstance(images, torch.Tensor) and isinstance(labels, torch.Tensor)
    named = shardpack.Loader(dataset_path, batch_size=8, shuffle="none", framework="numpy")
    assert np.array_equal(images.numpy(), next(iter(named))[0])


def test_an_unknown_framework_is_refused_naming_the_choices(dataset_path):
    with pytest.raises(
        shardpack.InvalidArgumentError, match='"auto", "torch", "tensorflow", "jax" or "numpy"'
    ):
        shardpack.Loader(dataset_path, framework="mxnet")


def test_shardpack_tf_without_tensorflow_says_what_to_install(dataset_path):
    # shardpack.tf imports without TensorFlow; making a dataset names the package.
    out = run_without_module("tensorflow", f"""
        import shardpack.tf
        try:
            shardpack.tf.dataset({dataset_path!r})
        except ImportError as e:
            assert "pip install tensorflow-cpu" in str(e), str(e)
            print("ImportError")
    """)
    assert out.strip() == "ImportError"
