"""Lexical ranking of the skills one agent may discover: field weights, synonyms, typo tolerance.

An index is built from the agent's permitted entries only (registry.discovery caches it per snapshot and
agent), so nothing outside that set shapes a score, a spelling correction or a synonym. It runs in
process, the same on PostgreSQL and SQLite.

Fields and weights: the tool part of the name, the manifest's `title`, `synonyms`, `tags` and `examples`
(all optional, written by owners) weigh more than the description. A query word matches a document word
exactly (1.0), through a shared synonym group (0.6: the built-in vocabulary below, generic tool words
only), or as a typo (0.7: one edit, two for long words, against words of the permitted set). A result
must account for at least MIN_COVERAGE of the query's weight (inverse document frequency), so a query
about something the agent may not use answers nothing instead of the nearest unrelated tool.
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass, field
from itertools import zip_longest

FIELD_WEIGHTS = {
    "name": 3.0,
    "title": 2.5,
    "synonyms": 2.5,
    "tags": 2.0,
    "examples": 2.0,
    "namespace": 1.5,
    "description": 1.0,
}
SYNONYM_WEIGHT = 0.6
TYPO_WEIGHT = 0.7
# How far a match accounts for the query word (coverage), whatever field it is in.
COVERAGE = {"exact": 1.0, "typo": 0.85, "synonym": 0.75}
UNKNOWN_WORD_SHARE = 1.0  # a word no permitted skill has weighs as much as the mean known one
DESCRIPTION_ONLY_COVERAGE = 0.8  # a word found only in the description accounts for less of the query
MIN_COVERAGE = 0.45  # of the query's idf mass, for the best result
MIN_COVERAGE_OTHERS = 0.3  # for the results after it (multi-step tasks spread over several tools)
RANKED_DEPTH = 50  # the most results a search returns (registry.discovery.MAX_LIMIT)
MEMO_SIZE = 4096  # query words remembered per index
SATURATION = 2.0  # BM25-like: field weights add up with diminishing returns

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "to",
        "of",
        "for",
        "and",
        "or",
        "in",
        "on",
        "by",
        "with",
        "my",
        "me",
        "i",
        "is",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "be",
        "are",
        "was",
        "were",
        "what",
        "which",
        "who",
        "whom",
        "do",
        "does",
        "did",
        "we",
        "you",
        "your",
        "our",
        "us",
        "have",
        "has",
        "had",
        "please",
        "can",
        "could",
        "would",
        "should",
        "will",
        "how",
        "about",
        "from",
        "at",
        "as",
        "into",
        "then",
        "after",
        "before",
        "their",
        "they",
        "them",
        "his",
        "her",
        "him",
        "any",
        "some",
        "not",
        "just",
        "also",
        "when",
        "where",
        "there",
        "here",
        "so",
        "one",
        "use",
        "used",
        "using",
        "returns",
        "return",
        "want",
        "need",
        "like",
        "let",
        "s",
        "t",
        "via",
        "now",
        "first",
    ]
)

# Phrases agents use for one tool word, rewritten before tokenising.
PHRASES = {
    "get rid of": "delete",
    "call off": "cancel",
    "sign off": "approve",
    "look up": "lookup",
    "look for": "search",
    "set up": "create",
    "hand over": "assign",
    "money back": "refund",
    "credit back": "refund",
    "pay back": "refund",
    "tl;dr": "summary",
    "tldr": "summary",
    "knowledge base": "documentation",
    "help article": "documentation",
    "show all": "list",
    "what did": "history",
    "do we have": "list",
}

# Generic tool vocabulary: words agents use interchangeably. Domain words belong in manifests' `synonyms`.
SYNONYM_GROUPS = [
    "get fetch retrieve read show view open lookup detail info display see check",
    "list browse history all enumerate",
    "search find query lookup locate",
    "create make add new open start issue raise",
    "update change edit modify correct set mark",
    "delete remove erase purge destroy wipe",
    "cancel abort stop void revoke",
    "export download dump csv spreadsheet extract",
    "send email mail message notify reply deliver",
    "approve accept okay confirm authorize",
    "archive hide shelve",
    "assign reassign delegate give transfer hand",
    "summarize summary recap overview digest brief",
    "draft prepare propose compose unsent",
    "sync synchronize refresh resync reconcile",
    "refund reimburse reimbursement chargeback repay",
    "customer client account buyer",
    "order purchase buy bought",
    "documentation docs doc manual guide help article reference handbook",
    "ticket case",
    "email mail inbox",
    "inbound incoming received",
    "status state",
    "close resolve reopen",
    "user login person",
    "remove permanently irreversible",
]


def stem(word: str) -> str:
    """A small suffix stripper: plurals, -ing, -ed and a final e, so "archived", "archives", "archive" agree."""
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses") or word.endswith(("xes", "ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    if len(word) > 4 and word[-1] == word[-2] and word[-1] not in "aeiolsz":
        word = word[:-1]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


STEP_SEPARATORS = re.compile(r"\s*(?:[,;]|\band then\b|\bthen\b|\band\b|\bafter that\b)\s*", re.I)
_PHRASE_PATTERN = re.compile(r"\b(" + "|".join(re.escape(p) for p in sorted(PHRASES, key=len, reverse=True)) + r")\b")


_ID_PATTERN = re.compile(r"\b[a-z]+_[a-z0-9]*[0-9][a-z0-9]*\b")  # cus_123, ord_77: argument values, not intent


def terms(text: str) -> list[str]:
    """Lower-cased, phrase-rewritten, stemmed words without stop words or ids; `a.b_c` splits into a, b, c."""
    text = _PHRASE_PATTERN.sub(lambda match: PHRASES[match.group(1)], _ID_PATTERN.sub(" ", text.lower()))
    return [stem(word) for word in re.findall(r"[a-z0-9]+", text) if word not in STOP_WORDS]


_GROUP_OF: dict[str, set[int]] = {}
for _number, _group in enumerate(SYNONYM_GROUPS):
    for _word in _group.split():
        _GROUP_OF.setdefault(stem(_word), set()).add(_number)


def _groups(term: str) -> set[int]:
    return _GROUP_OF.get(term, set())


def _distinct(words: list[str]) -> list[str]:
    """Each word once, and a word dropped when an earlier one already stands for all its synonym groups
    ("download them as csv" asks for one export, not two)."""
    kept: list[str] = []
    seen_groups: set[int] = set()
    for word in dict.fromkeys(words):
        groups = _groups(word)
        if groups and groups <= seen_groups:
            continue
        kept.append(word)
        seen_groups |= groups
    return kept


def _deletes(word: str) -> set[str]:
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


def _edit_distance(a: str, b: str, limit: int) -> int:
    """Damerau-Levenshtein (optimal string alignment), stopping early past `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous_previous: list[int] = []
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, char_b in enumerate(b, 1):
            cost = char_a != char_b
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and char_a == b[j - 2] and a[i - 2] == char_b:
                current[j] = min(current[j], previous_previous[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        previous_previous, previous = previous, current
    return previous[-1]


def skill_texts(entry: dict) -> dict[str, str]:
    """The text of each ranked field of a snapshot entry (name, namespace, manifest)."""
    manifest = entry.get("manifest") or {}
    tool = entry["name"].rsplit(".", 1)[-1]

    def joined(key: str) -> str:
        values = manifest.get(key)
        return " ".join(str(value) for value in values) if isinstance(values, list) else ""

    return {
        "name": tool,
        "namespace": entry.get("namespace", ""),
        "title": str(manifest.get("title") or ""),
        "synonyms": joined("synonyms"),
        "tags": joined("tags"),
        "examples": joined("examples"),
        "description": str(manifest.get("description") or ""),
    }


@dataclass
class RankIndex:
    """Postings over one permitted set: term -> {document: summed field weight}; synonym groups likewise."""

    entries: list[dict]
    postings: dict[str, dict[int, float]]
    group_postings: dict[int, dict[int, float]]
    idf: dict[str, float]
    group_idf: dict[int, float]
    deletes: dict[str, set[str]]
    _memo: dict[str, tuple] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, entries: list[dict]) -> RankIndex:
        postings: dict[str, dict[int, float]] = {}
        group_postings: dict[int, dict[int, float]] = {}
        for number, entry in enumerate(entries):
            weights: dict[str, float] = {}
            for field_name, text in skill_texts(entry).items():
                for term in set(terms(text)):
                    weights[term] = weights.get(term, 0.0) + FIELD_WEIGHTS[field_name]
            group_weights: dict[int, float] = {}
            for term, weight in weights.items():
                postings.setdefault(term, {})[number] = weight
                for group in _groups(term):
                    group_weights[group] = max(group_weights.get(group, 0.0), weight)
            for group, weight in group_weights.items():
                group_postings.setdefault(group, {})[number] = weight
        total = len(entries)

        def idf(document_count: int) -> float:
            return math.log(1 + (total - document_count + 0.5) / (document_count + 0.5))

        deletes: dict[str, set[str]] = {}
        for term in postings:
            if len(term) >= 4 and not term.isdigit():
                for key in _deletes(term) | {term}:
                    deletes.setdefault(key, set()).add(term)
        return cls(
            entries=entries,
            postings=postings,
            group_postings=group_postings,
            idf={term: idf(len(docs)) for term, docs in postings.items()},
            group_idf={group: idf(len(docs)) for group, docs in group_postings.items()},
            deletes=deletes,
        )

    def _corrections(self, term: str) -> set[str]:
        """Words of the permitted set one edit away (two for words of 8 letters or more)."""
        if len(term) < 5 or term.isdigit():
            return set()  # "tall" is not a typo of "call"
        limit = 2 if len(term) >= 8 else 1
        keys = _deletes(term) | {term}
        if limit == 2:
            keys |= {second for first in _deletes(term) for second in _deletes(first)}
        candidates = set().union(*(self.deletes.get(key, set()) for key in keys))
        return {
            candidate
            for candidate in candidates
            if candidate != term
            and (len(term) >= 7 or candidate[0] == term[0])
            and _edit_distance(term, candidate, limit) <= limit
        }

    def _matches(self, term: str) -> tuple[float | None, dict[int, tuple[float, float]]]:
        """(the term's idf, None when no permitted skill has it; each document's best (score, coverage))."""
        best: dict[int, tuple[float, float]] = {}

        def offer(documents: dict[int, float], factor: float, coverage: float) -> None:
            for document, weight in documents.items():
                value = factor * weight / (weight + SATURATION)
                share = coverage * (DESCRIPTION_ONLY_COVERAGE if weight <= FIELD_WEIGHTS["description"] else 1.0)
                previous_value, previous_coverage = best.get(document, (0.0, 0.0))
                best[document] = (max(value, previous_value), max(share, previous_coverage))

        exact = term in self.postings
        variants = [term] if exact else sorted(self._corrections(term))
        for variant in variants:
            typo = variant != term
            offer(self.postings[variant], TYPO_WEIGHT if typo else 1.0, COVERAGE["typo" if typo else "exact"])
            for group in _groups(variant):
                offer(
                    self.group_postings.get(group, {}),
                    (TYPO_WEIGHT if typo else 1.0) * SYNONYM_WEIGHT,
                    COVERAGE["synonym"] * (COVERAGE["typo"] if typo else 1.0),
                )
        if not exact:
            for group in _groups(term):
                offer(self.group_postings.get(group, {}), SYNONYM_WEIGHT, COVERAGE["synonym"])
        known = [self.idf[v] for v in variants] + [self.group_idf[g] for g in _groups(term) if g in self.group_idf]
        return (max(known) if known else None), best

    def rank(self, query: str, *, allowed: set[int] | None = None, limit: int = 10) -> list[dict]:
        """The best `limit` entries for `query`; `allowed` narrows to entry positions (filters).

        A multi-step task ("find the order, then refund it") is ranked step by step when the whole finds
        nothing, and the steps' results are interleaved: the best of each step first.
        """
        whole = self._rank_terms(_distinct(terms(query)), allowed)
        steps = [step for step in STEP_SEPARATORS.split(query) if terms(step)]
        if len(steps) < 2:
            return [self.entries[d] for d in whole[:limit]]
        per_step = [self._rank_terms(_distinct(terms(step)), allowed) for step in steps]
        merged = list(dict.fromkeys(d for rank in zip_longest(*per_step) for d in rank if d is not None))
        if not whole:
            return [self.entries[d] for d in merged[:limit]]
        return [self.entries[d] for d in list(dict.fromkeys(whole[:1] + merged + whole))[:limit]]

    def _weighted(self, term: str) -> tuple[float | None, dict[int, tuple[float, float]]]:
        """`_matches` with the idf applied, remembered per index: agents reuse the same words."""
        found = self._memo.get(term)
        if found is None:
            weight, best = self._matches(term)
            weighted = {d: (weight * value, weight * share) for d, (value, share) in best.items()} if weight else {}
            found = (weight, weighted)
            if len(self._memo) < MEMO_SIZE:
                self._memo[term] = found
        return found

    def _rank_terms(self, query_terms: list[str], allowed: set[int] | None) -> list[int]:
        if not query_terms or not self.entries:
            return []
        matched = [self._weighted(term) for term in query_terms]
        known = sorted((pair for pair in matched if pair[0] is not None), key=lambda pair: -pair[0])
        if not known:
            return []
        unknown = len(matched) - len(known)
        weights = [weight for weight, _ in known]
        total_weight = sum(weights) * (1 + UNKNOWN_WORD_SHARE * unknown / len(known))
        # MaxScore-style pruning: a document matching none of the heavier words cannot reach
        # MIN_COVERAGE_OTHERS, so the lighter words (often common verbs) only add to candidates.
        head = len(known)
        while head > 1 and sum(weights[head - 1 :]) < MIN_COVERAGE_OTHERS * total_weight:
            head -= 1
        scores: dict[int, float] = {}
        covered: dict[int, float] = {}
        for _, best in known[:head]:
            for document, (value, share) in best.items():
                scores[document] = scores.get(document, 0.0) + value
                covered[document] = covered.get(document, 0.0) + share
        for _, best in known[head:]:
            for document in scores:
                hit = best.get(document)
                if hit is not None:
                    scores[document] += hit[0]
                    covered[document] += hit[1]
        threshold = MIN_COVERAGE_OTHERS * total_weight
        candidates = [d for d in scores if covered[d] >= threshold and (allowed is None or d in allowed)]
        ranked = heapq.nsmallest(
            RANKED_DEPTH, candidates, key=lambda d: (-scores[d] * covered[d], self.entries[d]["name"])
        )
        if not ranked or covered[ranked[0]] / total_weight < MIN_COVERAGE:
            return []
        return ranked


__all__ = ["FIELD_WEIGHTS", "RankIndex", "skill_texts", "stem", "terms"]
