#!/usr/bin/env python3
"""Trains a ResNet-18 (torchvision) on a shardpack dataset with shardpack.Loader.

Single process, on the CPU or one GPU:

    python3 samples/train_torch.py data/caltech256 --epochs 2 --batch-size 64

Several processes (one per GPU, or several CPU processes with the gloo backend), each
reading its own part of every epoch:

    torchrun --nproc_per_node 2 samples/train_torch.py data/caltech256 --epochs 2

Prints, per epoch and per process: images/s, the fraction of the time spent waiting for
data, the mean loss, and the loader's own counters. The dataset comes from
``shardpack convert`` (or shardpack.convert); any fixed or variable size works, the loader
crops to --size. Checkpoints (--checkpoint) hold the model, the optimiser and the loader's
state, so an interrupted run resumes mid-epoch with the same batches (--resume).
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torchvision

import shardpack
import shardpack.torch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="shardpack dataset directory")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64, help="per process")
    p.add_argument("--size", type=int, default=224, help="output side in pixels")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--threads", type=int, default=0, help="loader threads (0: all cores)")
    p.add_argument("--prefetch", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=0, help="stop each epoch after N steps")
    p.add_argument("--device", default="auto", help='"auto", "cpu" or "cuda"')
    p.add_argument("--checkpoint", help="save model, optimiser and loader state here")
    p.add_argument("--resume", action="store_true", help="start from --checkpoint")
    return p.parse_args()


def main():
    args = parse_args()
    info = shardpack.torch.distributed_info()
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if use_cuda:
        torch.cuda.set_device(info.local_rank)
        device = torch.device("cuda", info.local_rank)
    else:
        device = torch.device("cpu")
    if info.world_size > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo")

    dataset = shardpack.Dataset(args.data)
    loader = shardpack.Loader(
        dataset,
        batch_size=args.batch_size,
        seed=0,
        num_threads=args.threads,
        prefetch=args.prefetch,
        device=device,
        rank=info.rank,
        world_size=info.world_size,
        drop_last=True,
        output_size=args.size,
        transform="random_resized_crop",
        flip=True,
        normalize="imagenet",
        dtype="float32",
    )
    net = torchvision.models.resnet18(num_classes=len(dataset.classes)).to(device)
    model = net  # what trains; net is what checkpoints hold
    if info.world_size > 1:
        model = torch.nn.parallel.DistributedDataParallel(
            net, device_ids=[info.local_rank] if use_cuda else None
        )
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    start_epoch = 0
    if args.resume and args.checkpoint and os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint, map_location=device)
        net.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        loader.load_state_dict(saved["loaders"][info.rank])
        state = loader.state_dict()
        start_epoch = state["epoch"] + (state["next_batch"] >= len(loader))
    print(
        f"rank {info.rank}/{info.world_size}: {len(dataset)} samples, "
        f"{len(dataset.classes)} classes, {len(loader)} batches of {args.batch_size} per "
        f"epoch, device {device}",
        flush=True,
    )

    criterion = torch.nn.CrossEntropyLoss()
    model.train()
    for epoch in range(start_epoch, args.epochs):
        loader.set_epoch(epoch)  # keeps a resumed position in this epoch
        images_done, steps, wait, loss_sum = 0, 0, 0.0, torch.zeros((), device=device)
        start = time.perf_counter()
        images = labels = None
        batches = iter(loader)
        while True:
            t0 = time.perf_counter()
            try:
                images, labels = next(batches)
            except StopIteration:
                break
            wait += time.perf_counter() - t0
            loss = criterion(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_sum += loss.detach()
            images_done += images.shape[0]
            steps += 1
            if args.max_steps and steps == args.max_steps:
                break
        del images, labels  # the last batch's ring slot
        if use_cuda:
            torch.cuda.synchronize()  # count the epoch's queued GPU work in its time
        seconds = time.perf_counter() - start
        print(
            f"rank {info.rank} epoch {epoch}: {images_done / seconds:.1f} images/s, "
            f"data wait {100 * wait / seconds:.1f}% of {seconds:.1f} s, "
            f"loss {loss_sum.item() / max(steps, 1):.3f}, {steps} steps; loader: "
            f"{loader.stats()}",
            flush=True,
        )
        if args.checkpoint:
            # Every rank's loader state (they differ in the rank), saved by rank 0.
            loaders = [loader.state_dict()]
            if info.world_size > 1:
                loaders = [None] * info.world_size
                dist.all_gather_object(loaders, loader.state_dict())
            if info.rank == 0:
                torch.save(
                    {
                        "model": net.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "loaders": loaders,
                    },
                    args.checkpoint,
                )
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
