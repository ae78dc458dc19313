#!/usr/bin/env python3
"""The reference of the GPU check's training step: torchvision ImageFolder + DataLoader.

The same ResNet-18 step as samples/train_torch.py, fed as the PyTorch documentation
recommends for an image folder: decode and RandomResizedCrop in num_workers processes,
pin_memory=True, non_blocking copies. Prints per epoch the images/s and the fraction of
the time spent waiting for data, as train_torch.py does, so that the two lines compare.

    python3 imagefolder_reference.py IMAGES --epochs 2 --batch-size 256 --workers 16
"""

import argparse
import os
import time

import torch
import torchvision
from torchvision import transforms


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("images", help="a class-folder tree of images")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--device", default="cuda")
    a = p.parse_args()

    device = torch.device(a.device)
    data = torchvision.datasets.ImageFolder(
        a.images,
        transforms.Compose(
            [
                transforms.RandomResizedCrop(a.size),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
            ]
        ),
    )
    loader = torch.utils.data.DataLoader(
        data,
        batch_size=a.batch_size,
        shuffle=True,
        num_workers=a.workers,
        pin_memory=device.type == "cuda",
        drop_last=True,
        persistent_workers=a.workers > 0,
    )
    model = torchvision.models.resnet18(num_classes=len(data.classes)).to(device)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    print(f"ImageFolder: {len(data)} images, {len(data.classes)} classes, "
          f"batch {a.batch_size}, {a.workers} workers, {device}")
    for epoch in range(a.epochs):
        images, wait = 0, 0.0
        start = time.perf_counter()
        batches = iter(loader)
        while True:
            t0 = time.perf_counter()
            try:
                x, y = next(batches)
            except StopIteration:
                break
            wait += time.perf_counter() - t0
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            images += x.shape[0]
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        print(f"epoch {epoch}: {images / seconds:.0f} images/s, "
              f"data wait {100 * wait / seconds:.1f}% of {seconds:.1f} s")


if __name__ == "__main__":
    main()
