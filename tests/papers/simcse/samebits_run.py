"""Unsupervised SimCSE (Gao, Yao and Chen, EMNLP 2021) for the corpus (samebits' own file):
the authors' BertForCL and its cl_forward (simcse/models.py: every sentence encoded twice, the
two dropout masks are the positive pair, the other sentences of the batch the negatives, the
[CLS] pooler with its MLP, temperature 0.05) on a TINY randomly initialised BERT (2 layers,
hidden 64) with a BertTokenizer made from a vocabulary this script writes, trained for 60
steps on generated sentences on a CPU; nothing is downloaded. The options are the authors'
run_unsup_example.sh (pooler cls, mlp_only_train, temp 0.05) and train.py's ModelArguments
defaults; the features are made as train.py's prepare_features makes them (each sentence
twice) and the optimiser is the one their Trainer uses (transformers' AdamW, a linear decay).
Written under out/: each step's loss, the final metrics (with the alignment and uniformity of
Wang and Isola that the paper reports) and the trained weights."""

import json
import os
import random
from types import SimpleNamespace

import torch
from simcse.models import BertForCL
from transformers import AdamW, BertConfig, BertTokenizer, get_linear_schedule_with_warmup

SEED, STEPS, BATCH, MAX_LEN = 0, 60, 32, 32

random.seed(SEED)
torch.manual_seed(SEED)
os.makedirs("out", exist_ok=True)

# A vocabulary of made-up words (BERT's special tokens first) and sentences drawn from it:
# each sentence is a short "topic" of related words, so that a sentence and its neighbours
# share words and the contrastive task is not trivial.
letters = "abcdefghijklmnopqrstuvwxyz"
words = sorted({"".join(random.choice(letters) for _ in range(random.randint(3, 8)))
                for _ in range(400)})
specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
with open("out/vocab.txt", "w") as f:
    f.write("\n".join(specials + words) + "\n")
tokenizer = BertTokenizer("out/vocab.txt", do_lower_case=True)
topics = [random.sample(words, 30) for _ in range(16)]


def sentence() -> str:
    topic = random.choice(topics)
    return " ".join(random.choice(topic) if random.random() < 0.8 else random.choice(words)
                    for _ in range(random.randint(6, 20)))


train_sentences = [sentence() for _ in range(STEPS * BATCH)]
eval_sentences = [sentence() for _ in range(128)]


def features(sentences: list[str]) -> dict[str, torch.Tensor]:
    """train.py's prepare_features for an unsupervised file (the sentence is both sent0 and
    sent1), padded as its collator pads: (batch, 2, length)."""
    total = len(sentences)
    enc = tokenizer(sentences + sentences, max_length=MAX_LEN, truncation=True,
                    padding="longest", return_tensors="pt")
    return {k: torch.stack([v[:total], v[total:]], dim=1) for k, v in enc.items()}


config = BertConfig(vocab_size=len(specials) + len(words), hidden_size=64, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=128, max_position_embeddings=64)
model_args = SimpleNamespace(temp=0.05, pooler_type="cls", hard_negative_weight=0.0,
                             do_mlm=False, mlm_weight=0.1, mlp_only_train=True)
model = BertForCL(config, model_args=model_args)

optimizer = AdamW(model.parameters(), lr=5e-3, weight_decay=0.0)
schedule = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=0,
                                           num_training_steps=STEPS)
model.train()
losses = []
with open("out/train_log.jsonl", "w") as log:
    for step in range(STEPS):
        batch = features(train_sentences[step * BATCH:(step + 1) * BATCH])
        out = model(**batch)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        losses.append(out.loss.item())
        log.write(json.dumps({"step": step, "loss": losses[-1],
                              "lr": schedule.get_last_lr()[0]}) + "\n")

# The sentence embeddings the authors evaluate (sent_emb=True, dropout off, the [CLS] pooler
# without the MLP: mlp_only_train), and two dropout views of them for alignment.
model.eval()
batch = tokenizer(eval_sentences, max_length=MAX_LEN, truncation=True, padding="longest",
                  return_tensors="pt")
with torch.no_grad():
    emb = torch.nn.functional.normalize(model(**batch, sent_emb=True).pooler_output, dim=-1)
    model.train()
    views = [torch.nn.functional.normalize(model(**batch, sent_emb=True).pooler_output, dim=-1)
             for _ in range(2)]
    eval_loss = model(**features(eval_sentences)).loss.item()
alignment = (views[0] - views[1]).norm(dim=1).pow(2).mean().item()
uniformity = torch.pdist(emb, p=2).pow(2).mul(-2).exp().mean().log().item()
with open("out/metrics.json", "w") as f:
    json.dump({"final_loss": losses[-1], "mean_loss_last10": sum(losses[-10:]) / 10,
               "eval_loss": eval_loss, "alignment": alignment, "uniformity": uniformity}, f,
              indent=1, sort_keys=True)
torch.save(model.state_dict(), "out/simcse.pt")
