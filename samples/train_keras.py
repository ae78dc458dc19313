#!/usr/bin/env python3
"""Trains a small convolutional network with Keras `model.fit` on a shardpack dataset, read
by shardpack.tf.dataset (the loader's C++ threads and shuffles behind a tf.data.Dataset).

    python3 samples/train_keras.py data/caltech256 --epochs 2 --batch-size 64 --size 64

Needs TensorFlow (pip install tensorflow-cpu) and the shardpack package. Prints Keras's
loss per epoch, then "loss: FIRST -> LAST". The dataset comes from `shardpack convert`
(or shardpack.convert); the loader crops or resizes to --size.
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
    history = model.fit(ds, epochs=a.epochs, verbose=2, shuffle=False)
    losses = history.history["loss"]
    print(f"loss: {losses[0]:.4f} -> {losses[-1]:.4f}")
    print(f"loader: {ds.shardpack_loader.stats()}")


if __name__ == "__main__":
    main()
