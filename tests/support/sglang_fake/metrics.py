"""Prometheus metrics as SGLang exposes them (names, labels, help texts, bucket bounds), from what the fake served.

Token counters are exact sums of the usage the server reported. GPU time is simulated from the script's per-token
costs; latencies are what the fake actually measured (request arrival to answer).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from support.sglang_fake.script import Script

__all__ = ["Answer", "Metrics"]


@dataclass
class Answer:
    """Usage and timing of one answered chat request."""

    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    seconds: float


# Bucket bounds as SGLang's TokenizerMetricsCollector and SchedulerMetricsCollector define them by default.
_TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
_E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)
_ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
                0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)
_QUEUE_BUCKETS = (0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400,
                  500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000)


class Metrics:
    """Counters that grow with served requests, gauges computed at scrape time, histograms of measured latency."""

    def __init__(self, script: Script) -> None:
        name = script.served_name
        self.tokenizer_labels = {"model_name": name, "engine_type": "unified"}
        self.scheduler_labels = {"model_name": name, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0",
                                 "moe_ep_rank": "0"}
        self.gpu = script.gpu
        self.token_capacity = int(script.server_args.get("max_total_tokens") or 1_048_576)
        self.prompt_tokens = self.generation_tokens = self.cached_tokens = self.requests = 0
        self.gpu_extend_seconds = self.gpu_decode_seconds = 0.0
        self.ttft = _Histogram(_TTFT_BUCKETS)
        self.e2e = _Histogram(_E2E_BUCKETS)
        self.itl = _Histogram(_ITL_BUCKETS)
        self.queue = _Histogram(_QUEUE_BUCKETS)
        self.last_scrape = (time.monotonic(), 0, 0.0)  # when, generation tokens, gpu seconds
        self.last_gen_throughput = 0.0
        self.last_utilization = 0.0

    def record(self, answer: Answer) -> None:
        self.requests += 1
        self.prompt_tokens += answer.prompt_tokens
        self.cached_tokens += answer.cached_tokens
        self.generation_tokens += answer.completion_tokens
        self.gpu_extend_seconds += (answer.prompt_tokens - answer.cached_tokens) * self.gpu.prefill_seconds_per_token
        self.gpu_decode_seconds += answer.completion_tokens * self.gpu.decode_seconds_per_token
        self.ttft.observe(answer.seconds)
        self.e2e.observe(answer.seconds)
        self.itl.observe(self.gpu.decode_seconds_per_token)
        self.queue.observe(0.0)

    def render(self, running: int, running_prompt_tokens: int) -> str:
        now = time.monotonic()
        gpu_seconds = self.gpu_extend_seconds + self.gpu_decode_seconds
        then, generated_then, gpu_then = self.last_scrape
        interval = now - then
        if interval > 0:
            self.last_gen_throughput = (self.generation_tokens - generated_then) / interval
            self.last_utilization = min(1.0, (gpu_seconds - gpu_then) / interval)
        self.last_scrape = (now, self.generation_tokens, gpu_seconds)
        tok, sch = self.tokenizer_labels, self.scheduler_labels
        out: list[str] = []
        counter = _family(out, "counter")
        gauge = _family(out, "gauge")
        counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", [(tok, self.prompt_tokens)])
        counter("sglang:generation_tokens_total", "Number of generation tokens processed.",
                [(tok, self.generation_tokens)])
        counter("sglang:cached_tokens_total", "Number of cached prompt tokens.", [(tok, self.cached_tokens)])
        counter("sglang:num_requests_total", "Number of requests processed.", [(tok, self.requests)])
        counter("sglang:num_aborted_requests_total", "Number of requests aborted.", [(tok, 0)])
        _histogram(out, "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", tok,
                   self.ttft)
        _histogram(out, "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", tok,
                   self.itl)
        _histogram(out, "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                   tok, self.e2e)
        gauge("sglang:num_running_reqs", "The number of running requests.", [(sch, running)])
        gauge("sglang:num_used_tokens", "The number of used tokens.", [(sch, running_prompt_tokens)])
        gauge("sglang:token_usage", "The token usage.", [(sch, min(1.0, running_prompt_tokens / self.token_capacity))])
        gauge("sglang:gen_throughput", "The generation throughput (token/s).", [(sch, self.last_gen_throughput)])
        gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", [(sch, 0)])
        gauge("sglang:cache_hit_rate", "The prefix cache hit rate.",
              [(sch, self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0)])
        gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.",
              [(sch, self.token_capacity)])
        gauge("sglang:utilization", "The utilization.", [(sch, self.last_utilization)])
        _histogram(out, "sglang:queue_time_seconds", "Histogram of queueing time in seconds.", sch, self.queue)
        counter("sglang:realtime_tokens_total",
                "Total number of tokens processed (updated on each log interval). "
                "mode: prefill_compute, prefill_cache, decode.",
                [({**sch, "mode": "prefill_compute"}, self.prompt_tokens - self.cached_tokens),
                 ({**sch, "mode": "prefill_cache"}, self.cached_tokens),
                 ({**sch, "mode": "decode"}, self.generation_tokens)])
        counter("sglang:gpu_execution_seconds_total",
                "Total time that GPU is busy executing a workload. Refer to ForwardMode for category labels.",
                [({**sch, "category": "forward_extend"}, self.gpu_extend_seconds),
                 ({**sch, "category": "forward_decode"}, self.gpu_decode_seconds)])
        return "".join(out)


class _Histogram:
    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        for index, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[index] += 1
                break
        else:
            self.counts[-1] += 1
        self.sum += value


def _family(out: list[str], kind: str) -> Callable[[str, str, list[tuple[dict[str, str], float]]], None]:
    def add(name: str, documentation: str, samples: list[tuple[dict[str, str], float]]) -> None:
        out.append(f"# HELP {name} {documentation}\n# TYPE {name} {kind}\n")
        for labels, value in samples:
            out.append(f"{name}{_labels(labels)} {float(value)!r}\n")
    return add


def _histogram(out: list[str], name: str, documentation: str, labels: dict[str, str], histogram: _Histogram) -> None:
    out.append(f"# HELP {name} {documentation}\n# TYPE {name} histogram\n")
    cumulative = 0
    for bound, count in zip((*histogram.bounds, float("inf")), histogram.counts):
        cumulative += count
        le = "+Inf" if bound == float("inf") else repr(float(bound))
        out.append(f"{name}_bucket{_labels({**labels, 'le': le})} {float(cumulative)!r}\n")
    out.append(f"{name}_sum{_labels(labels)} {histogram.sum!r}\n")
    out.append(f"{name}_count{_labels(labels)} {float(cumulative)!r}\n")


def _labels(labels: dict[str, str]) -> str:
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return "{" + ",".join(f'{key}="{escape(str(value))}"' for key, value in labels.items()) + "}"
