"""TensorFlow and Keras: the loader's batches as a ``tf.data.Dataset`` or a Keras
``PyDataset``, ranks from ``TF_CONFIG``, and a Keras callback that saves the loader's place.

    import shardpack.tf
    ds = shardpack.tf.dataset("data/", batch_size=128, output_size=224, flip=True)
    model.fit(ds, epochs=10)          # each pass over ds is the loader's next epoch

    ds = shardpack.tf.PyDataset("data/", batch_size=128, output_size=224, flip=True)
    checkpoint = shardpack.tf.LoaderCheckpoint(ds, "ckpt/loader.json")
    start = checkpoint.restore()      # 0, or the epoch the last run's state is at
    if start:
        model = keras.models.load_model("ckpt/model.keras")
    model.fit(ds, epochs=10, shuffle=False, initial_epoch=start,
              callbacks=[keras.callbacks.ModelCheckpoint("ckpt/model.keras"), checkpoint])

The batches come from :class:`shardpack.Loader` (its C++ threads, shuffles, ranks and
transforms), NHWC, TensorFlow's layout. ``dataset`` takes rank and world size, unless
given, from ``TF_CONFIG`` when it names a cluster, else from a launcher's variables
(:func:`distributed_info`). ``dataset`` needs TensorFlow (``pip install tensorflow-cpu``
or ``tensorflow``); ``PyDataset`` and ``LoaderCheckpoint`` need Keras 3 (any backend).
``import shardpack.tf`` imports neither: the two Keras classes are made on first use.
"""

import json
import numbers
import os
import threading
import warnings
import numpy as np

from shardpack import _shardpack
from shardpack._distributed import DistributedInfo, from_launcher
from shardpack._errors import InvalidArgumentError
from shardpack._loader import Loader
from shardpack._util import UINT64_MAX, integer

__all__ = [
    "dataset",
    "PyDataset",
    "LoaderCheckpoint",
    "DistributedInfo",
    "distributed_info",
]


def _tensorflow():
    try:
        import tensorflow as tf
    except ImportError as e:
        raise ImportError(
            "shardpack.tf needs TensorFlow: pip install tensorflow-cpu (or tensorflow)"
        ) from e
    return tf


def _keras():
    try:
        import keras
    except ImportError as e:
        raise ImportError(
            "shardpack.tf.PyDataset and LoaderCheckpoint need Keras 3: pip install keras "
            "(with tensorflow-cpu, jax or torch as its backend)"
        ) from e
    if not hasattr(keras.utils, "PyDataset"):
        raise ImportError(
            f"shardpack.tf.PyDataset and LoaderCheckpoint need Keras 3; keras "
            f"{keras.__version__} has no keras.utils.PyDataset: pip install 'keras>=3'"
        )
    return keras


# Ranks.


# The task types TensorFlow's ClusterSpec validation allows.
_TF_CONFIG_JOBS = ("chief", "worker", "evaluator", "ps")


def distributed_info():
    """This worker's ``(rank, world_size, local_rank)``: from the ``TF_CONFIG`` environment
    variable when it names a cluster, else from a launcher's variables
    (torchrun's RANK and WORLD_SIZE, Open MPI's, PMI's, Slurm's: the C++ library's
    RankFromEnvironment, docs/SCALE.md; mpirun, as Horovod starts workers), else
    ``(0, 1, 0)``: ``DistributedInfo(rank, world_size, local_rank)``, the shape every
    framework's ``distributed_info()`` has (local rank 0 under TF_CONFIG).
    :func:`dataset` takes rank and world size from here when neither is given.

    InvalidArgumentError names TF_CONFIG and its fault (see ``_tf_config_rank``), or the
    launcher's variables, when they are malformed."""
    info = _tf_config_rank()
    if info is not None:
        return info
    return from_launcher()


def _tf_config_rank():
    """This worker's ``DistributedInfo(rank, world_size, 0)`` from the
    ``TF_CONFIG`` environment variable, numbered as ``MultiWorkerMirroredStrategy``
    numbers its workers (tensorflow/python/distribute/multi_worker_util.py): the chief,
    if there is one, is worker 0, then the "worker" tasks by index; the world size counts
    both. An "evaluator" task reads on its own: rank 0 of 1. None when TF_CONFIG is unset
    or names no cluster.

    Raises InvalidArgumentError naming TF_CONFIG and the fault when it is not such a JSON
    object: not JSON, an unknown task type, two chiefs, no "task", a task type without
    tasks in the cluster, an index missing or out of range, or a "ps" task (a parameter
    server reads no training data)."""
    text = os.environ.get("TF_CONFIG", "")
    if not text.strip():
        return None

    def fault(what):
        return InvalidArgumentError(f"TF_CONFIG: {what} (TF_CONFIG={text})")

    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise fault(f"not JSON: {e}") from None
    if not isinstance(config, dict):
        raise fault(f"expected a JSON object, found {type(config).__name__}")
    cluster = config.get("cluster", {})
    if not isinstance(cluster, dict):
        raise fault('"cluster" is not an object of task lists')
    sizes = {}
    for job, tasks in cluster.items():
        if job not in _TF_CONFIG_JOBS:
            raise fault(f'unknown task type "{job}" in "cluster" (TensorFlow allows '
                        f'{", ".join(_TF_CONFIG_JOBS)})')
        if not isinstance(tasks, (list, dict)):
            raise fault(f'"cluster"."{job}" is not a list of addresses')
        sizes[job] = len(tasks)
    if not cluster:
        return None
    if sizes.get("chief", 0) > 1:
        raise fault(f'{sizes["chief"]} chiefs: a cluster has at most one')

    task = config.get("task")
    if not isinstance(task, dict):
        raise fault('a cluster and no "task": {"type": ..., "index": ...} says which one this is')
    job = task.get("type")
    if job not in _TF_CONFIG_JOBS:
        raise fault(f'"task"."type" is {job!r}, not one of {", ".join(_TF_CONFIG_JOBS)}')
    if job == "ps":
        raise fault('a "ps" task (a parameter server) reads no training data')
    if job == "evaluator":
        return DistributedInfo(0, 1, 0)
    index = task.get("index")
    if isinstance(index, str) and index.isdigit():
        index = int(index)  # TensorFlow's resolver takes int(index)
    if not isinstance(index, int) or isinstance(index, bool):
        raise fault(f'"task"."index" is {index!r}, not a whole number')
    count = sizes.get(job, 0)
    if not 0 <= index < count:
        raise fault(f'"task"."index" is {index}, and "cluster"."{job}" has {count} tasks')
    chiefs = sizes.get("chief", 0)
    rank = 0 if job == "chief" else chiefs + index
    return DistributedInfo(rank, chiefs + sizes.get("worker", 0), 0)


def _loader_arguments(who, loader_kwargs):
    """The Loader keywords of ``who``: NumPy arrays, NHWC unless given."""
    if loader_kwargs.get("framework", "numpy") != "numpy":
        raise InvalidArgumentError(f"{who}: leave framework out (the batches are NumPy "
                                   "arrays, which TensorFlow and Keras take as they are)")
    kwargs = dict(loader_kwargs, framework="numpy")
    kwargs.setdefault("layout", "NHWC")
    return kwargs


# Loader states.


def _state_at(loader, epoch, batch):
    """``loader.state_dict()`` moved to batch ``batch`` of ``epoch`` (what the order
    depends on kept)."""
    text = _shardpack.loader_state_at(loader.state_dict()["loader_state"], epoch, batch)
    return {"loader_state": text, "epoch": epoch, "next_batch": batch}


def _ranks(loader):
    """(rank, world_size) of ``loader``."""
    parsed = _shardpack.parse_loader_state(loader.state_dict()["loader_state"])
    return parsed["rank"], parsed["world_size"]


# tf.data.


def dataset(path, batch_size=256, *, copy=True, **loader_kwargs):
    """A ``tf.data.Dataset`` of ``(images, labels)`` batches read by a
    :class:`shardpack.Loader` made with these arguments (``framework`` is NumPy and
    ``layout`` NHWC unless given): images N x H x W x C (uint8, or float32/float16 with
    ``normalize`` or a float ``dtype``), labels int64.

    Each iteration over the dataset (each Keras epoch) is the loader's next epoch, in the
    order the same loader delivers to PyTorch code for the same seed. The loader
    (``framework="tensorflow"``) is ``dataset.shardpack_loader``; resume at an epoch's
    start with :class:`LoaderCheckpoint`, which saves its state with Keras checkpoints
    (tf.data reads ahead of its consumer, so a ``state_dict()`` taken within a pass is not
    the consumer's position, and a pass must have the epoch's cardinality).

    Ranks: ``rank`` and ``world_size`` together, or neither, and then
    :func:`distributed_info`'s (TF_CONFIG's, else a launcher's, else 0 of 1). With a world
    size above 1 the dataset is this worker's part of each epoch, and tf.distribute's
    auto-sharding is off for it (``AutoShardPolicy.OFF``), so that a multi-worker strategy
    does not split it again; with ``strategy.distribute_datasets_from_function``, pass
    ``rank=ctx.input_pipeline_id, world_size=ctx.num_input_pipelines``.

    ``copy=True`` (the default): each batch is copied out of its ring slot into memory
    TensorFlow allocates (``tf.raw_ops.DeepCopy``; its allocator reuses buffers, so this
    costs a memcpy and no page faults), because ``tf.data`` operations after this one
    (``prefetch``, ``shuffle``, ``cache``) may keep batches past the ring's lifetime.
    ``copy=False``: the tensors adopt the ring slots through DLPack, no copy (about twice
    the batches per second, docs/PYTHON.md); then at most ``prefetch`` batches may be held
    besides the one in use (``model.fit`` on the dataset as it is does that), and a
    pipeline that holds more (a ``shuffle`` or ``prefetch`` after it) fails, rather than
    reading overwritten memory, with ``tf.errors.UnknownError`` carrying the loader's
    FailedPreconditionError "... needs the ring slot still held ..." (TensorFlow wraps
    every error raised in a generator so). Float NHWC batches, not row-major in the slot, are copied either
    way (TensorFlow adopts only row-major memory).
    """
    kwargs = _loader_arguments("shardpack.tf.dataset", loader_kwargs)
    given = ("rank" in kwargs) + ("world_size" in kwargs)
    if given == 1:
        raise InvalidArgumentError(
            "shardpack.tf.dataset: give rank and world_size together, or neither"
        )
    if not given:
        kwargs["rank"], kwargs["world_size"], _ = distributed_info()
    tf = _tensorflow()
    kwargs["framework"] = "tensorflow"
    loader = Loader(path, batch_size, **kwargs)
    # The element shapes and dtype from the first batch; the loader is then put back where
    # it was, so that the first pass starts with that same batch.
    start = loader.state_dict()
    try:
        first = loader.next_batch()
    except StopIteration:
        raise InvalidArgumentError(
            f"shardpack.tf.dataset: {path}: an epoch has no batches for this rank "
            f"({len(loader)} batches per epoch; batch_size {batch_size} with drop_last and "
            "fewer samples than a batch?)"
        ) from None
    images = first.numpy()
    image_spec = tf.TensorSpec((None,) + images.shape[1:], tf.as_dtype(images.dtype))
    # The loader adopts row-major slots (uint8 NHWC, float NCHW) and copies the others.
    deep_copy = copy and images.flags.c_contiguous
    del first, images
    loader.load_state_dict(start)

    # tf.data runs each pass's generator on its own threads and reads ahead, so an
    # abandoned pass may still be pulling while a newer one starts: one loader call at a
    # time, and a batch leaves the lock copied (its slot's view dropped) or adopted.
    lock = threading.Lock()

    def batches():
        with lock:
            epoch = iter(loader)  # a new pass; the older one stops at its next batch
        while True:
            with lock:
                try:
                    images, labels = next(epoch)
                except StopIteration:
                    return
                if deep_copy:
                    images = tf.raw_ops.DeepCopy(x=images)
            yield images, labels

    ds = tf.data.Dataset.from_generator(
        batches, output_signature=(image_spec, tf.TensorSpec((None,), tf.int64))
    )
    # The batches of an epoch are known: Keras then counts its steps per epoch.
    ds = ds.apply(tf.data.experimental.assert_cardinality(len(loader)))
    if kwargs["world_size"] > 1:
        # This worker's part already: a tf.distribute strategy must not split it again.
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.OFF
        )
        ds = ds.with_options(options)
    ds.shardpack_loader = loader
    return ds


# Keras. The classes below hold the methods; PyDataset and LoaderCheckpoint are made from
# them and Keras's base classes on first use (the module's __getattr__), so that importing
# shardpack.tf imports no Keras, and isinstance(ds, keras.utils.PyDataset) holds.


class _PyDataset:
    """A ``keras.utils.PyDataset`` of a :class:`shardpack.Loader`'s batches, for
    ``model.fit`` on any Keras 3 backend (TensorFlow, JAX, PyTorch)::

        ds = shardpack.tf.PyDataset("data/", batch_size=128, output_size=224, flip=True)
        model.fit(ds, epochs=10, shuffle=False)

    The loader is made with these arguments (NHWC NumPy arrays unless ``layout`` is
    given) and is ``ds.loader``. ``len(ds)`` is its batches per epoch; ``ds[i]`` is batch
    ``i`` of the current epoch ``ds.epoch``, ``(images, labels)``: the loader's batch
    ``i``, byte for byte, copied out of its ring (Keras may keep the arrays longer than
    the ring does).

    Epochs: Keras calls ``on_epoch_begin`` and ``on_epoch_end`` around each pass, and
    ``on_epoch_end`` moves to the loader's next epoch once the pass has served the epoch's
    last batch. Keras also calls ``on_epoch_end`` when ``fit`` starts, and after reading
    ahead in a probe pass that builds a model under a distribution strategy; those keep
    the epoch, unless the probe read a whole epoch (one of 5 batches or fewer, under
    ``MirroredStrategy`` with TensorFlow 2.21). ``set_epoch(e)`` chooses the epoch, and
    :class:`LoaderCheckpoint` sets Keras's at the start of each.

    Order: batches asked for in order (``model.fit(..., shuffle=False)``) stream from the
    loader's prefetch. Batch 0 asked for again (Keras's TensorFlow backend reads the first
    two batches to learn their shapes, then starts the pass) restarts the epoch in place.
    Any other batch out of order is served exactly too, by remaking the loader at that
    batch (its threads and ring; the batches it had prefetched are lost): ``model.fit``
    shuffles a PyDataset's batch order unless ``shuffle=False``, which this warns about
    once. The loader shuffles the samples itself (``shuffle``, ``seed``): pass
    ``shuffle=False`` to ``model.fit``.

    Ranks: ``rank`` and ``world_size`` as given (default 0 of 1). TF_CONFIG is not read:
    under a tf.distribute strategy Keras splits a PyDataset's batches among the workers
    itself (tf.data's auto-sharding of the pipeline Keras builds around it), so each
    worker reads every batch. Give ``rank`` and ``world_size`` where nothing else splits
    the data (Horovod, JAX processes).

    ``workers`` and ``use_multiprocessing`` stay at Keras's defaults: the loader's C++
    threads (``num_threads``, ``prefetch``) already read ahead, a Keras thread pool would
    ask for batches concurrently, and a Loader cannot be copied into other processes.
    Others raise InvalidArgumentError.
    """

    def __init__(self, path, batch_size=256, *, workers=1, use_multiprocessing=False,
                 **loader_kwargs):
        if workers not in (0, 1) or use_multiprocessing:
            raise InvalidArgumentError(
                f"shardpack.tf.PyDataset: workers={workers!r}, use_multiprocessing="
                f"{use_multiprocessing!r}: leave both out. The loader's C++ threads read "
                "ahead already (num_threads=, prefetch=), and a Loader cannot be copied into "
                "other processes"
            )
        super().__init__(workers=workers, use_multiprocessing=False)
        kwargs = _loader_arguments("shardpack.tf.PyDataset", loader_kwargs)
        self._loader = Loader(path, batch_size, **kwargs)
        # Keras's TensorFlow backend asks for batches from tf.data threads, and may start
        # the next pass's iterator before on_epoch_end: one request at a time.
        self._lock = threading.Lock()
        self._epoch = self._loader.epoch
        self._in_pass = False  # between on_epoch_begin and on_epoch_end
        self._served_last = False  # the epoch's last batch went out during this pass
        self._warned = False

    @property
    def loader(self):
        """The underlying :class:`shardpack.Loader`."""
        return self._loader

    @property
    def epoch(self):
        """The epoch whose batches ``ds[i]`` returns."""
        return self._epoch

    def __len__(self):
        return len(self._loader)

    def __getitem__(self, index):
        if not isinstance(index, numbers.Integral):
            raise TypeError(f"batch indices are integers, not {type(index).__name__}")
        n = len(self._loader)
        i = int(index) + n if index < 0 else int(index)
        if not 0 <= i < n:
            raise IndexError(f"batch {index} of an epoch of {n} batches")
        with self._lock:
            self._seek(i)
            batch = self._loader.next_batch()
            images = np.array(batch.numpy())
            labels = batch.labels
            del batch  # its ring slot goes back to the loader now
            if i == n - 1 and self._in_pass:
                self._served_last = True
        return images, labels

    def _seek(self, i):
        """Puts the loader at batch ``i`` of ``self._epoch``."""
        at = self._loader.state_dict()
        if (at["epoch"], at["next_batch"]) == (self._epoch, i):
            return
        if i == 0:
            # The C++ loader's StartEpoch: the same threads and ring. (It keeps a position
            # the loader was made or restored at in this epoch: then remade below.)
            self._loader.set_epoch(self._epoch)
            at = self._loader.state_dict()
            if (at["epoch"], at["next_batch"]) == (self._epoch, 0):
                return
        elif not self._warned:
            self._warned = True
            warnings.warn(
                f"shardpack.tf.PyDataset: batch {i} of epoch {self._epoch} was asked for while "
                f"the loader stood at batch {at['next_batch']} of epoch {at['epoch']}; each "
                "batch asked for out of order remakes the loader at that batch (its threads "
                "and ring), losing what it had prefetched. model.fit shuffles a PyDataset's "
                "batch order unless shuffle=False; the loader already shuffles the samples "
                "(its shuffle= and seed=): pass model.fit(..., shuffle=False)",
                RuntimeWarning,
                stacklevel=4,
            )
        self._loader.load_state_dict(_state_at(self._loader, self._epoch, i))

    def on_epoch_begin(self):
        with self._lock:
            self._in_pass = True
            self._served_last = False

    def on_epoch_end(self):
        with self._lock:
            if self._in_pass and self._served_last:
                self._epoch += 1
            self._in_pass = False
            self._served_last = False

    def set_epoch(self, epoch):
        """Makes ``epoch`` the epoch that ``ds[i]`` reads (from its batch 0)."""
        epoch = integer(epoch, "epoch", 0, UINT64_MAX)
        with self._lock:
            if epoch != self._epoch:
                self._epoch = epoch
                self._served_last = False

    def state_dict(self):
        """The loader's state at batch 0 of the current epoch (Keras starts each epoch, a
        resumed one too, from its first batch)."""
        with self._lock:
            return _state_at(self._loader, self._epoch, 0)

    def load_state_dict(self, state):
        """Restores the loader at ``state`` (any loader's ``state_dict()`` for the same
        options: InvalidArgumentError otherwise, naming what differs) and makes its epoch
        the current one. Within the epoch, ``ds[i]`` is batch ``i`` whatever batch the
        state names."""
        with self._lock:
            self._loader.load_state_dict(state)
            self._epoch = self._loader.epoch
            self._in_pass = False
            self._served_last = False

    def __repr__(self):
        return (
            f"shardpack.tf.PyDataset({self._loader.dataset.path!r}, batch_size="
            f"{self._loader.batch_size}, epoch={self._epoch}, {len(self)} batches per epoch)"
        )


class _LoaderCheckpoint:
    """A Keras callback that saves where a shardpack reader stands at the end of each
    epoch, and puts it back when training resumes::

        ds = shardpack.tf.PyDataset("data/", batch_size=128)   # or shardpack.tf.dataset
        checkpoint = shardpack.tf.LoaderCheckpoint(ds, "ckpt/loader.json")
        model.fit(ds, epochs=10, shuffle=False, initial_epoch=checkpoint.restore(),
                  callbacks=[keras.callbacks.ModelCheckpoint(...), checkpoint])

    ``reader``: a :class:`PyDataset`, a dataset made by :func:`dataset`, or a
    :class:`shardpack.Loader`. ``path``: the file, a JSON ``Loader.state_dict()`` for the
    first batch of the next epoch, written after each epoch to a temporary file that then
    replaces it (``os.replace``), so that a crash leaves the old state or the new one.
    With several workers, put ``{rank}`` in the path (``"ckpt/loader-{rank}.json"``):
    each worker's state names its rank.

    ``restore()`` loads the file into the reader when there is one and returns the epoch
    to resume at (0 without a file), for ``model.fit``'s ``initial_epoch``; ``fit`` calls
    it at the start of training if the code has not. At the start of each epoch the
    callback sets the reader's epoch to Keras's, as ``set_epoch`` does in PyTorch, so that
    a resumed ``fit`` reads exactly the batches an uninterrupted one would have read from
    that epoch on; a first epoch other than the restored one raises InvalidArgumentError
    naming both. A loader state saved for other options (seed, batch size, ranks, ...)
    raises InvalidArgumentError naming what differs.

    The state is saved at epoch ends only: Keras restarts an interrupted epoch from its
    first batch (``BackupAndRestore`` with a ``save_freq`` in batches does too), so a
    position within an epoch could not be resumed by ``fit``. A custom training loop
    that resumes mid-epoch saves ``loader.state_dict()`` itself.
    """

    def __init__(self, reader, path):
        super().__init__()
        if isinstance(reader, _PyDataset):
            self._loader = reader.loader
            self._set_epoch, self._load = reader.set_epoch, reader.load_state_dict
        else:
            loader = reader
            if not isinstance(loader, Loader):  # shardpack.tf.dataset's
                loader = getattr(reader, "shardpack_loader", None)
            if not isinstance(loader, Loader):
                raise InvalidArgumentError(
                    "shardpack.tf.LoaderCheckpoint saves a shardpack.tf.PyDataset, a "
                    "shardpack.tf.dataset or a shardpack.Loader, not a "
                    f"{type(reader).__name__}"
                )
            self._loader = loader
            self._set_epoch, self._load = loader.set_epoch, loader.load_state_dict
        path = os.fspath(path)
        rank, world_size = _ranks(self._loader)
        if "{rank}" in path:
            path = path.replace("{rank}", str(rank))
        elif world_size > 1:
            raise InvalidArgumentError(
                f"shardpack.tf.LoaderCheckpoint: {path}: the loader is rank {rank} of "
                f"{world_size}, and every worker would write this one file: put {{rank}} in "
                "the path"
            )
        self.path = path
        self._restored = False
        self._resume_epoch = None  # the restored state's epoch, until fit's first epoch

    def restore(self):
        """Loads the state saved at ``path``, if there is one, into the reader: returns
        the epoch it is at (``model.fit``'s ``initial_epoch``), or 0 without a file."""
        self._restored = True
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return 0
        try:
            state = json.loads(text)
        except json.JSONDecodeError as e:
            raise InvalidArgumentError(f"{self.path}: not a loader state: {e}") from None
        self._load(state)
        if self._loader.state_dict()["next_batch"]:
            # A state saved mid-epoch (not by this callback): fit runs the epoch from its
            # first batch.
            self._load(_state_at(self._loader, self._loader.epoch, 0))
        self._resume_epoch = self._loader.epoch
        return self._resume_epoch

    def on_train_begin(self, logs=None):
        if not self._restored:
            self.restore()

    def on_epoch_begin(self, epoch, logs=None):
        if self._resume_epoch is not None:
            if epoch != self._resume_epoch:
                raise InvalidArgumentError(
                    f"{self.path}: the loader state is at epoch {self._resume_epoch}, and "
                    f"model.fit starts at epoch {epoch}: pass "
                    f"initial_epoch={self._resume_epoch} (or remove the file to start over)"
                )
            self._resume_epoch = None
        self._set_epoch(epoch)

    def on_epoch_end(self, epoch, logs=None):
        state = _state_at(self._loader, epoch + 1, 0)
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        temporary = f"{self.path}.tmp-{os.getpid()}"
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump(state, f)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, self.path)


_KERAS_CLASSES = {
    "PyDataset": (_PyDataset, lambda keras: keras.utils.PyDataset),
    "LoaderCheckpoint": (_LoaderCheckpoint, lambda keras: keras.callbacks.Callback),
}
_keras_classes_lock = threading.Lock()


def __getattr__(name):
    if name not in _KERAS_CLASSES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _keras_classes_lock:
        if name not in globals():
            methods, base = _KERAS_CLASSES[name]
            globals()[name] = type(name, (methods, base(_keras())), {
                "__module__": __name__, "__qualname__": name, "__doc__": methods.__doc__})
    return globals()[name]
