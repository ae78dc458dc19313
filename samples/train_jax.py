#!/usr/bin/env python3
"""Trains a small convolutional network in plain JAX (jax.grad, SGD with momentum) on a
shardpack dataset read by shardpack.jax.Loader (the loader's C++ threads and shuffles,
batches handed to JAX through DLPack without a copy).

    python3 samples/train_jax.py data/caltech256 --steps 100 --batch-size 64 --size 64

Needs JAX (pip install jax) and the shardpack package. Prints the loss every --log steps,
then "loss: FIRST -> LAST" (means over the first and the last --log steps). The batches
are split over the devices (one on a CPU-only machine) with a NamedSharding; the
loader's state is saved with --save and taken back with --resume, as a checkpoint would.
"""

import argparse
import json
import os

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import shardpack.jax


def init_params(key, classes):
    k1, k2, k3 = jax.random.split(key, 3)

    def he(k, shape, fan_in):
        return jax.random.normal(k, shape) * jnp.sqrt(2.0 / fan_in)

    return {
        "c1": he(k1, (3, 3, 3, 16), 27),
        "c2": he(k2, (3, 3, 16, 32), 144),
        "w": he(k3, (32, classes), 32),
        "b": jnp.zeros((classes,)),
    }


def logits(params, images):
    conv = lambda x, w: jax.lax.conv_general_dilated(  # noqa: E731
        x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    x = jax.nn.relu(conv(images, params["c1"]))
    x = jax.nn.relu(conv(x, params["c2"]))
    return x.mean(axis=(1, 2)) @ params["w"] + params["b"]


def loss_fn(params, images, labels):
    lg = logits(params, images)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(lg), labels[:, None], axis=1))


@jax.jit
def train_step(params, momentum, images, labels, lr):
    loss, grads = jax.value_and_grad(loss_fn)(params, images, labels)
    momentum = jax.tree.map(lambda m, g: 0.9 * m + g, momentum, grads)
    params = jax.tree.map(lambda p, m: p - lr * m, params, momentum)
    return params, momentum, loss


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="shardpack dataset directory")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--size", type=int, default=64, help="output side in pixels")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log", type=int, default=10, help="steps per printed loss")
    p.add_argument("--save", help="write the loader's state_dict (JSON) here at the end")
    p.add_argument("--resume", help="start the loader from a state_dict saved by --save")
    a = p.parse_args()

    with open(os.path.join(a.data, "manifest.json"), encoding="utf-8") as f:
        classes = len(json.load(f)["classes"])
    mesh = Mesh(jax.devices(), ("data",))  # every process's devices (after jax.distributed)
    state = None
    if a.resume:
        with open(a.resume, encoding="utf-8") as f:
            state = json.load(f)
    loader = shardpack.jax.Loader(
        a.data, a.batch_size, seed=a.seed, output_size=a.size,
        transform="random_resized_crop", flip=True, normalize="imagenet",
        drop_last=True,  # every batch splits evenly over the mesh
        sharding=NamedSharding(mesh, P("data")), state=state,
    )
    params = init_params(jax.random.key(a.seed), classes)
    momentum = jax.tree.map(jnp.zeros_like, params)
    losses = []
    step = 0
    while step < a.steps:
        for images, labels in loader:  # the next epoch on each pass
            params, momentum, loss = train_step(params, momentum, images, labels, a.lr)
            losses.append(float(loss))
            step += 1
            if step % a.log == 0:
                print(f"step {step}: loss {sum(losses[-a.log:]) / a.log:.4f}", flush=True)
            if step == a.steps:
                break
    n = min(a.log, len(losses))
    print(f"loss: {sum(losses[:n]) / n:.4f} -> {sum(losses[-n:]) / n:.4f}")
    print(f"loader: {loader.stats()}")
    if a.save:
        with open(a.save, "w", encoding="utf-8") as f:
            json.dump(loader.state_dict(), f)


if __name__ == "__main__":
    main()
