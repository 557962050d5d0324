"""A generator of posts with hashtags, and the plain-Python count the Spark job must agree with.

Hashtags follow a Zipf-like law (a few are very popular, most are rare); a few users post in
bursts, repeating one hashtag many times in a short while. Time is simulated: every post has an
event time (the record's timestamp), advancing from a fixed start, so a run is reproducible from
its seed and independent of the wall clock.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

HASHTAG = re.compile(r"#(\w+)")
WORDS = ("hello", "today", "look", "wow", "news", "coffee", "match", "sunset", "code", "music")


@dataclass(frozen=True)
class Post:
    user: str
    text: str
    time_ms: int

    def encode(self) -> bytes:
        return json.dumps({"user": self.user, "text": self.text}).encode()

    def hashtags(self) -> list[str]:
        """The hashtags as the Spark job extracts them: `#word`, lower-cased, repeats kept."""
        return HASHTAG.findall(self.text.lower())


@dataclass(frozen=True)
class WindowSpec:
    size_ms: int = 10 * 60_000
    slide_ms: int = 5 * 60_000
    watermark_ms: int = 2 * 60_000
    top_n: int = 5

    def __post_init__(self) -> None:
        assert self.size_ms % self.slide_ms == 0, "the window size must be a multiple of the slide"

    def windows_of(self, time_ms: int) -> Iterator[tuple[int, int]]:
        """The [start, end) windows containing `time_ms`, aligned to the epoch as Spark's are."""
        last_start = time_ms - time_ms % self.slide_ms
        start = last_start
        while start > time_ms - self.size_ms:
            yield start, start + self.size_ms
            start -= self.slide_ms


def generate_posts(count: int, seed: int, start_ms: int, users: int = 200, tags: int = 60,
                   zipf_exponent: float = 1.1, bursters: int = 3, mean_gap_ms: int = 2_000) -> list[Post]:
    """`count` posts in non-decreasing event time; a few bursty users repeat one hashtag."""
    rng = random.Random(seed)
    weights = [1 / (rank ** zipf_exponent) for rank in range(1, tags + 1)]
    names = [f"tag{rank}" for rank in range(1, tags + 1)]
    burst_tags = {f"burster{b}": f"burst{b}" for b in range(bursters)}
    posts: list[Post] = []
    now = start_ms
    while len(posts) < count:
        now += int(rng.expovariate(1 / mean_gap_ms)) + 1
        if burst_tags and rng.random() < 0.02:  # a burst: one user, one hashtag, many posts at once
            user = rng.choice(sorted(burst_tags))
            for _ in range(min(rng.randint(10, 40), count - len(posts))):
                now += rng.randint(50, 400)
                posts.append(Post(user, f"{rng.choice(WORDS)} #{burst_tags[user]} #{rng.choice(names[:5])}", now))
            continue
        chosen = rng.choices(names, weights, k=rng.choice((0, 1, 1, 2, 3)))
        text = " ".join([rng.choice(WORDS), *(f"#{t}" if rng.random() < 0.8 else f"#{t.upper()}" for t in chosen)])
        posts.append(Post(f"user{rng.randrange(users)}", text, now))
    return posts


def closing_post(posts: Iterable[Post], spec: WindowSpec) -> Post:
    """A post late enough that the watermark passes every window of `posts` (so all are final)."""
    last = max(post.time_ms for post in posts)
    return Post("clock", "end of stream", last + spec.size_ms + spec.watermark_ms + spec.slide_ms)


def expected_counts(posts: Iterable[Post], spec: WindowSpec) -> dict[tuple[int, int], Counter[str]]:
    """Hashtag counts per sliding window, counted in plain Python."""
    counts: dict[tuple[int, int], Counter[str]] = {}
    for post in posts:
        tags = post.hashtags()
        if not tags:
            continue
        for window in spec.windows_of(post.time_ms):
            counts.setdefault(window, Counter()).update(tags)
    return counts


def top_n(counts: Counter[str], n: int) -> list[tuple[str, int]]:
    """Highest counts first; ties by hashtag, descending (the job sorts (count, tag) descending)."""
    ranked = sorted(counts.items(), key=lambda item: (item[1], item[0]), reverse=True)
    return ranked[:n]
