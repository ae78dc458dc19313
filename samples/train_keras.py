#!/usr/bin/env python3
"""Trains a small convolutional network with Keras `model.fit` on a shardpack dataset, read
by shardpack.tf.dataset (the loader's C++ threads and shuffles behind a tf.data.Dataset).

    python3 samples/train_keras.py data/caltech256 --epochs 2 --batch-size 64 --size 64

Needs TensorFlow (pip install tensorflow-cpu) and the shardpack package. Prints Keras's
loss per epoch, then "loss: FIRST -> LAST". The dataset comes from `shardpack convert`
(or shardpack.convert); the loader crops or resizes to --size. With --checkpoint DIR the
model (Keras's ModelCheckpoint) and the loader's state (shardpack.tf.LoaderCheckpoint) are
saved there after each epoch, and a later run with a larger --epochs goes on from there,
with the batches an uninterrupted run would have read.
"""

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

import shardpack.tf  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="shardpack dataset directory")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--size", type=int, default=64, help="output side in pixels")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", metavar="DIR",
                   help="save the model and the loader's state here each epoch; resume from them")
    a = p.parse_args()

    with open(os.path.join(a.data, "manifest.json"), encoding="utf-8") as f:
        classes = len(json.load(f)["classes"])
    tf.keras.utils.set_random_seed(a.seed)
    ds = shardpack.tf.dataset(a.data, a.batch_size, seed=a.seed, output_size=a.size,
                              transform="random_resized_crop", flip=True, normalize="imagenet")
    keras = tf.keras
    model = keras.Sequential([
        keras.Input((a.size, a.size, 3)),
        keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
        keras.layers.Conv2D(32, 3, strides=2, activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(classes),
    ])
    model.compile(optimizer=keras.optimizers.Adam(a.lr),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    callbacks, start = [], 0
    if a.checkpoint:
        model_path = os.path.join(a.checkpoint, "model.keras")
        loader_path = os.path.join(a.checkpoint, "loader.json")
        loader_checkpoint = shardpack.tf.LoaderCheckpoint(ds, loader_path)
        start = loader_checkpoint.restore()  # 0 without a saved state
        if start:
            model = keras.models.load_model(model_path)
            print(f"resumed at epoch {start} from {a.checkpoint}")
        # The model first: a crash between the two saves repeats an epoch's batches rather
        # than skipping them.
        callbacks = [keras.callbacks.ModelCheckpoint(model_path), loader_checkpoint]
    history = model.fit(ds, epochs=a.epochs, initial_epoch=start, verbose=2, shuffle=False,
                        callbacks=callbacks)
    losses = history.history.get("loss")
    if losses:
        print(f"loss: {losses[0]:.4f} -> {losses[-1]:.4f}")
    print(f"loader: {ds.shardpack_loader.stats()}")


if __name__ == "__main__":
    main()
