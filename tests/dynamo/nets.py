"""Small models the torch.compile tests share (the transformer is the parity suite's TinyGPT)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from xlanb import events


def mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 2 * 2, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def of_type(log_events, kind):
    return [e for e in log_events if isinstance(e, kind)]


def executions(log_events):
    return len(of_type(log_events, events.Execute))


def compiles(log_events):
    return len(of_type(log_events, events.Compile))
