"""TensorFlow and Keras: the loader's batches as a ``tf.data.Dataset``.

    import shardpack.tf
    ds = shardpack.tf.dataset("data/", batch_size=128, output_size=224, flip=True)
    model.fit(ds, epochs=10)          # each pass over ds is the loader's next epoch

The batches come from :class:`shardpack.Loader` (its C++ threads, shuffles, ranks and
transforms), NHWC, TensorFlow's layout. TensorFlow needs to be installed (``pip install
tensorflow-cpu`` or ``tensorflow``); ``import shardpack`` alone does not import it.
"""

import numpy as np

from shardpack._errors import InvalidArgumentError
from shardpack._loader import Loader


def _tensorflow():
    try:
        import tensorflow as tf
    except ImportError as e:
        raise ImportError(
            "shardpack.tf needs TensorFlow: pip install tensorflow-cpu (or tensorflow)"
        ) from e
    return tf


def dataset(path, batch_size=256, **loader_kwargs):
    """A ``tf.data.Dataset`` of ``(images, labels)`` batches read by a
    :class:`shardpack.Loader` made with these arguments (``framework`` is NumPy and
    ``layout`` NHWC unless given): images N x H x W x C (uint8, or float32/float16 with
    ``normalize`` or a float ``dtype``), labels int64.

    Each iteration over the dataset (each Keras epoch) is the loader's next epoch, in the
    order the same loader delivers to PyTorch code for the same seed. The loader is
    ``dataset.shardpack_loader``: its ``state_dict()`` and ``load_state_dict()`` resume
    mid-epoch as in PyTorch.

    One copy per batch: ``tf.data`` may keep tensors past the loader's ring lifetime
    (``prefetch + 1`` batches), so each batch is copied out of its ring slot before it is
    handed to TensorFlow (a memcpy of the batch, next to the loader's own work).
    """
    if loader_kwargs.get("framework", "numpy") != "numpy":
        raise InvalidArgumentError(
            "shardpack.tf.dataset delivers TensorFlow tensors: leave framework out"
        )
    loader_kwargs["framework"] = "numpy"
    loader_kwargs.setdefault("layout", "NHWC")
    tf = _tensorflow()
    loader = Loader(path, batch_size, **loader_kwargs)
    # The element shapes and dtype from the first batch; the loader is then put back where
    # it was, so that the first pass starts with that same batch.
    start = loader.state_dict()
    first = loader.next_batch()
    images = first.numpy()
    image_spec = tf.TensorSpec((None,) + images.shape[1:], tf.as_dtype(images.dtype))
    del first, images
    loader.load_state_dict(start)

    def batches():
        for images, labels in loader:
            yield np.array(images), labels

    ds = tf.data.Dataset.from_generator(
        batches, output_signature=(image_spec, tf.TensorSpec((None,), tf.int64))
    )
    # The batches of an epoch are known: Keras then counts its steps per epoch.
    ds = ds.apply(tf.data.experimental.assert_cardinality(len(loader)))
    ds.shardpack_loader = loader
    return ds
