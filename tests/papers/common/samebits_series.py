"""Generated data for the forecasting papers of the corpus (samebits' own file, not the
authors'): a CSV in the layout their ``--data custom`` loader reads (a ``date`` column, then the
series, the target ``OT`` last). Seven noisy sines of different periods, hourly from
2016-07-01; numpy's generator seeded, so the same bytes on every machine with this numpy."""

import argparse
import os

import numpy as np
import pandas as pd

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--rows", type=int, default=600)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

rng = np.random.default_rng(args.seed)
t = np.arange(args.rows, dtype=np.float64)
columns = {"date": pd.date_range("2016-07-01", periods=args.rows, freq="h").strftime(
    "%Y-%m-%d %H:%M:%S")}
for i, name in enumerate(["c0", "c1", "c2", "c3", "c4", "c5", "OT"]):
    period = 12.0 + 7.0 * i
    columns[name] = np.round(np.sin(2 * np.pi * t / period + i) + 0.1 * rng.standard_normal(
        args.rows) + 0.01 * i * t / args.rows, 6)
os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
pd.DataFrame(columns).to_csv(args.out, index=False)
print(f"wrote {args.out}: {args.rows} rows, 7 series")
