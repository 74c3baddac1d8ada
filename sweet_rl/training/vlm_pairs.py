"""VLM critic pairs: what the frontend's vision-language critic is trained on (no torch here).

``evaluate_html.py --vlm_preference_path`` writes them, ``train_dpo.py --critic_head
vlm_regression`` reads them (:mod:`sweet_rl.training.vlm_heads`). One JSON object a line::

    {"chosen":   {"image": "<reference screenshot>", "text": "<last input + output>"},
     "rejected": {"image": "<reference screenshot>", "text": "<last input + output>"}}

``image`` is a PNG/JPEG path, relative to the pair file's folder or absolute (as trajectory
files store their screenshots); ``text`` is the whole dialogue as the agent's last turn saw
and wrote it: the text critic's pair text (``--ground_truth_preference_path``) without its
reference-HTML prefix, since the picture stands for the reference. Both sides of a pair are
rollouts of one task, so they show the same picture. The pairs are the text critic's: the
same selection rule, in the same order.
"""

from __future__ import annotations

import logging
import os
from typing import Dict, List, Sequence, Tuple

logger = logging.getLogger(__name__)

VLMItem = Tuple[str, str]  # (image path, text)


def vlm_pair_row(image: str, chosen: str, rejected: str) -> Dict[str, Dict[str, str]]:
    """One line of a VLM critic pair file."""
    return {"chosen": {"image": image, "text": chosen},
            "rejected": {"image": image, "text": rejected}}


def read_vlm_pairs(path: str) -> List[Tuple[VLMItem, VLMItem]]:
    """``[((image, text) chosen, (image, text) rejected), ...]`` with the images' paths made
    absolute; a bad row or a missing picture raises a RecordError naming file, line, field."""
    from sweet_rl.io import iter_jsonl
    from sweet_rl.records import RecordError
    from sweet_rl.rendering.screenshots import resolve

    def parse(data) -> Tuple[VLMItem, VLMItem]:
        if not isinstance(data, dict):
            raise RecordError(f"expected an object, got {type(data).__name__}")
        items = []
        for side in ("chosen", "rejected"):
            item = data.get(side)
            if not isinstance(item, dict):
                raise RecordError('expected {"image": path, "text": text}', field=side)
            for key in ("image", "text"):
                if not isinstance(item.get(key), str) or not item[key]:
                    raise RecordError("missing or not a non-empty string", field=f"{side}.{key}")
            image = os.path.normpath(resolve(item["image"], path))
            if not os.path.isfile(image):
                raise RecordError(f"picture {item['image']} not found", field=f"{side}.image")
            items.append((image, item["text"]))
        return items[0], items[1]

    pairs = list(iter_jsonl(path, parse))
    if not pairs:
        raise RecordError("no pairs", path=path)
    return pairs


def write_vlm_pairs(path: str, trajectories: Sequence, pairs: Sequence[Tuple[int, int]],
                    saved_path: str, arguments: dict) -> int:
    """Write the (chosen row, rejected row) ``pairs`` of evaluated frontend ``trajectories``
    (read from ``saved_path``) and the file's sidecar; returns how many were written.

    A pair whose reference page has no screenshot (its render failed) is left out with a
    warning: its rewards were scored against a black picture, and there is nothing to show.
    """
    from sweet_rl.evaluation.preferences import last_agent_text
    from sweet_rl.io import write_jsonl, write_sidecar
    from sweet_rl.rendering.pictures import REFERENCE_KEY
    from sweet_rl.rendering.screenshots import resolve, to_stored

    rows, missing = [], []
    for chosen, rejected in pairs:
        picture = resolve(trajectories[chosen].extra.get(REFERENCE_KEY), saved_path)
        if not picture or not os.path.isfile(picture):
            missing.append(chosen + 1)
            continue
        rows.append(vlm_pair_row(to_stored(picture, path), last_agent_text(trajectories[chosen]),
                                 last_agent_text(trajectories[rejected])))
    if missing:
        logger.warning("%s: %d pair(s) left out, their reference page has no screenshot "
                       "(rows %s of %s)", path, len(missing), missing[:10], saved_path)
    write_jsonl(path, rows)
    write_sidecar(path, arguments, "evaluate_html")
    return len(rows)
