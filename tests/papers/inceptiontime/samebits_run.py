"""The authors' example (example/example.py) made repeatable for the corpus (samebits' own
file): the same generated series and model, every generator seeded, fewer epochs and two
models instead of five so it runs on a CPU in seconds; the accuracies and the test
predictions are written where the manifest reads them."""

import json
import os
import random

import numpy as np
import torch
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split

from inception_time_pytorch.model import InceptionTime

random.seed(0)
np.random.seed(0)
torch.manual_seed(0)

# Generate the data (as the authors' example does)
N, C, L = 60, 10, 100
x = np.zeros((N, C, L))
t = np.linspace(0, 1, L)
c = np.cos(2 * np.pi * (10 * t - 0.5))
s = np.sin(2 * np.pi * (20 * t - 0.5))
x[:N // 3] = 20 + 20 * c + 5 * np.random.normal(size=(N // 3, C, L))
x[N // 3: 2 * N // 3] = 20 + 20 * s + 5 * np.random.normal(size=(N // 3, C, L))
x[2 * N // 3:] = 20 + 20 * c + 20 * s + 5 * np.random.normal(size=(N // 3, C, L))
y = np.concatenate([0 * np.ones(N // 3), 1 * np.ones(N // 3), 2 * np.ones(N // 3)])
x_train, x_test, y_train, y_test = train_test_split(x, y, stratify=y, test_size=0.3,
                                                    random_state=0)

model = InceptionTime(x=x_train, y=y_train, filters=32, depth=6, models=2)
model.fit(learning_rate=0.001, batch_size=64, epochs=15, verbose=True)

os.makedirs("out", exist_ok=True)
with open("out/metrics.json", "w") as f:
    json.dump({"train_accuracy": float(accuracy_score(y_train, model.predict(x_train))),
               "test_accuracy": float(accuracy_score(y_test, model.predict(x_test)))}, f)
torch.save({f"model{i}.{k}": v for i, m in enumerate(model.models)
            for k, v in m.state_dict().items()}, "out/weights.pt")
