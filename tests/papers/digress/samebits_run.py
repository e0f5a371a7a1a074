"""DiGress on generated stochastic block model graphs, for the corpus (samebits' own file).

The authors' discrete denoising diffusion (src/diffusion_model_discrete.py: their
GraphTransformer, marginal transition, cosine schedule, extra cycle and spectral features,
training loss) configured by their own Hydra files (dataset=sbm, +experiment=sbm), with the
network shrunk to 2 layers and the learning rate raised to 1e-3 so a CPU trains it (12 epochs
of batches of 8) in under a minute. Their SBM benchmark downloads SPECTRE's 200 graphs; here
64 graphs of 2-3 communities of 6-10 nodes are drawn (edge probability 0.6 inside a community,
0.05 across) from a seeded generator and split 40/12/12, in the format their
SpectreGraphDataset writes (one node type, two edge types). Each step's training loss (their
TrainLossDiscrete, what training_step returns), the test NLL (their test_step), the denoising
accuracy on the test graphs' node pairs (their apply_noise, compute_extra_data and forward, as
test_step runs them) and the trained weights are written where the manifest reads them.
Seeded; no download, no network (wandb disabled)."""

import json
import os
import sys

import torch
from hydra import compose, initialize_config_dir
from torch_geometric.data import Data
from torch_geometric.utils import dense_to_sparse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "src")]  # their imports use both (src.utils, models.*)

from datasets.abstract_dataset import AbstractDataModule  # noqa: E402
from datasets.spectre_dataset import SpectreDatasetInfos  # noqa: E402
from diffusion.extra_features import DummyExtraFeatures, ExtraFeatures  # noqa: E402
from diffusion_model_discrete import DiscreteDenoisingDiffusion  # noqa: E402
from metrics.abstract_metrics import TrainAbstractMetricsDiscrete  # noqa: E402
from src import utils  # noqa: E402

EPOCHS = 12


def sbm_graph(gen: torch.Generator) -> Data:
    """One SBM graph as SpectreGraphDataset.process() stores one: x all ones, edge_attr one-hot."""
    sizes = torch.randint(6, 11, (int(torch.randint(2, 4, (1,), generator=gen)),), generator=gen)
    block = torch.repeat_interleave(torch.arange(len(sizes)), sizes)
    p = torch.where(block[:, None] == block[None, :], 0.6, 0.05)
    upper = torch.triu(torch.rand(p.shape, generator=gen) < p, diagonal=1)
    adj = (upper | upper.T).float()
    n = adj.shape[-1]
    edge_index, _ = dense_to_sparse(adj)
    edge_attr = torch.zeros(edge_index.shape[-1], 2)
    edge_attr[:, 1] = 1
    return Data(x=torch.ones(n, 1), edge_index=edge_index, edge_attr=edge_attr,
                y=torch.zeros([1, 0]), n_nodes=n * torch.ones(1, dtype=torch.long))


torch.manual_seed(0)
with initialize_config_dir(version_base="1.3", config_dir=os.path.join(HERE, "configs")):
    cfg = compose(config_name="config", overrides=[
        "dataset=sbm", "+experiment=sbm", "general.name=corpus", "general.wandb=disabled",
        "train.batch_size=8", "train.lr=0.001", "model.n_layers=2",
        "model.hidden_mlp_dims={X: 32, E: 16, y: 32}",
        "model.hidden_dims={dx: 32, de: 16, dy: 16, n_head: 4, dim_ffX: 32, dim_ffE: 16, "
        "dim_ffy: 32}"])

gen = torch.Generator().manual_seed(1)
graphs = [sbm_graph(gen) for _ in range(64)]
datamodule = AbstractDataModule(cfg, {"train": graphs[:40], "val": graphs[40:52],
                                      "test": graphs[52:]})
dataset_infos = SpectreDatasetInfos(datamodule, cfg.dataset)
extra_features = ExtraFeatures(cfg.model.extra_features, dataset_info=dataset_infos)
domain_features = DummyExtraFeatures()
dataset_infos.compute_input_output_dims(datamodule=datamodule, extra_features=extra_features,
                                        domain_features=domain_features)
model = DiscreteDenoisingDiffusion(cfg=cfg, dataset_infos=dataset_infos,
                                   train_metrics=TrainAbstractMetricsDiscrete(),
                                   sampling_metrics=None, visualization_tools=None,
                                   extra_features=extra_features, domain_features=domain_features)
optimizer = model.configure_optimizers()

os.makedirs("out", exist_ok=True)
step = 0
with open("out/train_log.jsonl", "w") as log:
    for epoch in range(EPOCHS):
        model.train()
        for i, batch in enumerate(datamodule.train_dataloader()):
            loss = model.training_step(batch, i)["loss"]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            log.write(json.dumps({"step": step, "epoch": epoch, "loss": loss.item()}) + "\n")
            step += 1

model.eval()
correct = total = 0
with torch.no_grad():
    for i, batch in enumerate(datamodule.test_dataloader()):
        model.test_step(batch, i)
        dense, node_mask = utils.to_dense(batch.x, batch.edge_index, batch.edge_attr, batch.batch)
        dense = dense.mask(node_mask)
        noisy = model.apply_noise(dense.X, dense.E, batch.y, node_mask)
        pred = model.forward(noisy, model.compute_extra_data(noisy), node_mask)
        pairs = node_mask[:, :, None] & node_mask[:, None, :]
        pairs &= ~torch.eye(pairs.shape[1], dtype=torch.bool)[None]
        hit = pred.E.argmax(-1) == dense.E.argmax(-1)
        correct += int(hit[pairs].sum())
        total += int(pairs.sum())

metrics = {"test_nll": model.test_nll.compute().item(), "edge_accuracy": correct / total,
           "final_train_loss": loss.item()}
with open("out/metrics.json", "w") as f:
    json.dump(metrics, f, indent=2, sort_keys=True)
torch.save(model.model.state_dict(), "out/model.pt")
print(json.dumps(metrics))
