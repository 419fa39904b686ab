"""The stand-in API server: kmock's KubernetesEmulator (HTTP parsing, its record of requests, Status errors,
discovery, in-memory objects with history) with its gaps filled for pods, networkpolicies and events:

- create fills in what the API server does (namespace from the URL, generateName, uid, creationTimestamp, a
  cluster-wide resourceVersion bumped on every change; a pod starts Pending and is scheduled on one node);
- list and watch honour labelSelector, fieldSelector and the namespace, list also limit and continue; watch
  honours timeoutSeconds and resourceVersion (resuming from a backlog, 410 Expired beyond it), with no gap
  between its snapshot and its stream;
- patch is strategic merge (lists of conditions, containers, statuses and env merged by key), merge patch or
  JSON patch; the `status` subresource changes only status, the main resource never changes a pod's status;
- `pods/{name}/log`: the container's output in container mode (no options: follow, tail, since are ignored);
- delete and deletecollection (with selectors) hand the pod to the kubelet: removed at once in instant mode,
  Terminating until its container is gone in container mode;
- `pods/{name}/exec` over a websocket (exec_ws).

What a real server does and this one does not: admission, validation beyond a pod's containers, RBAC, quotas,
PUT, server-side apply, dry-run, finalizers on pods, bookmarks, label-selector transitions in watches (an object
leaving a selector sends no DELETED), other kinds (kmock's generic behaviour serves them)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

import attrs
from aiohttp import web
from kmock import KubernetesEmulator, KubernetesError, resource

from support.kube_fake import status
from support.kube_fake.exec_ws import ExecCall, serve_exec
from support.kube_fake.hub import EventHub
from support.kube_fake.kubelets import ContainerKubelet, Faults, Key, Kubelet
from support.kube_fake.recording import Seen
from support.kube_fake.selectors import field_selector, label_selector

__all__ = ["FakeApiServer", "PODS"]


@dataclass(frozen=True)
class _Kind:
    kind: str
    api_version: str
    version: str


PODS = resource("", "v1", "pods")
_KINDS = {("", "pods"): _Kind("Pod", "v1", "v1"), ("", "events"): _Kind("Event", "v1", "v1"),
          ("networking.k8s.io", "networkpolicies"): _Kind("NetworkPolicy", "networking.k8s.io/v1", "v1")}
_MERGE_KEYS = {"conditions": "type", "containers": "name", "containerStatuses": "name", "env": "name",
               "initContainers": "name", "initContainerStatuses": "name", "ports": "containerPort"}


def api_error(code: int, reason: str, message: str, **details: Any) -> KubernetesError:
    return KubernetesError(status=code, reason=reason, message=message, details=details or {"causes": []})


@attrs.define(kw_only=True)
class FakeApiServer(KubernetesEmulator):
    faults: Faults = attrs.field(factory=Faults)
    hub: EventHub = attrs.field(factory=EventHub)
    seen: Seen = attrs.field(factory=Seen)
    kubelet: Kubelet | None = attrs.field(default=None)
    _removals: set[asyncio.Task[None]] = attrs.field(factory=set)
    _live_execs: dict[Key, set[ExecCall]] = attrs.field(factory=dict)

    # --- what kubelets and hooks call ------------------------------------------------------------------------

    def pod(self, key: Key) -> dict[str, Any] | None:
        stored = self._stored(PODS, *key)
        return copy.deepcopy(stored.raw) if stored is not None else None

    def set_pod_status(self, key: Key, new_status: dict[str, Any]) -> bool:
        raw = self.pod(key)
        if raw is None:
            return False
        raw["status"] = new_status
        self._commit(PODS, raw, "MODIFIED")
        return True

    def kill_execs(self, key: Key) -> None:
        """The pod's container is gone: every exec into it ends as killed."""
        for call in self._live_execs.pop(key, set()):
            call.kill()

    async def vanish(self, key: Key) -> None:
        """The pod is gone without a deletion (its node lost, a force delete by someone else)."""
        assert self.kubelet is not None
        self._remove(PODS, *key)
        await self.kubelet.stop(key)

    async def close(self) -> None:
        for task in list(self._removals):
            with contextlib.suppress(Exception):
                await task
        if self.kubelet is not None:
            await self.kubelet.close()

    # --- HTTP ------------------------------------------------------------------------------------------------

    async def _handle(self, request: Any) -> web.StreamResponse:
        res = request.resource
        kind = _KINDS.get((res.group, res.plural)) if res is not None else None
        if kind is None:
            return await super()._handle(request)
        res = resource(res.group, kind.version, res.plural)
        verb = _verb(request)
        self.seen.request(verb, request.url.path)
        if res == PODS and verb in ("get", "list", "create", "delete", "exec") \
                and self.faults.take("throttled"):
            return web.json_response(
                {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 429,
                 "reason": "TooManyRequests", "details": {"retryAfterSeconds": 1},
                 "message": "the server has received too many requests and has asked us to try again later"},
                status=429, headers={"Retry-After": "1"})
        gauge = {"create": "creating", "delete": "deleting", "deletecollection": "deleting"}.get(verb)
        gauge = gauge if res == PODS else None
        if gauge:
            self.seen.begin(gauge)
        try:
            return await self._serve(verb, res, kind, request)
        except ValueError as exc:  # a selector or body that does not parse
            raise api_error(400, "BadRequest", str(exc)) from None
        finally:
            if gauge:
                self.seen.end(gauge)

    async def _serve(self, verb: str, res: resource, kind: _Kind, request: Any) -> web.StreamResponse:
        if verb == "exec":
            return await self._exec(request)
        if verb == "watch":
            return await self._watch(res, request)
        if verb == "list":
            items = [obj for obj in self.items(res, request.namespace) if self._matcher(request)(obj)]
            return web.json_response(self._page(kind, items, request.params))
        if verb == "get" and request.subresource == "log" and res == PODS:
            self._require(res, request.namespace, request.name)
            assert self.kubelet is not None
            return web.Response(body=await self.kubelet.logs((request.namespace, request.name)),
                                content_type="text/plain")
        if verb == "get" and request.subresource in (None, "status"):
            return web.json_response(self._require(res, request.namespace, request.name).raw)
        if verb == "create":
            return web.json_response(await self._create(res, kind, request), status=201)
        if verb == "patch":
            return web.json_response(self._patch(res, request))
        if verb == "delete":
            return web.json_response(await self._delete(res, request.namespace, request.name))
        if verb == "deletecollection":
            chosen = [obj for obj in self.items(res, request.namespace) if self._matcher(request)(obj)]
            deleted = await asyncio.gather(*(self._delete(res, obj["metadata"].get("namespace"),
                                                          obj["metadata"]["name"]) for obj in chosen))
            return web.json_response(self._list_body(kind, list(deleted)))
        raise api_error(405, "MethodNotAllowed", f"the stand-in does not serve {request.method} here")

    async def _create(self, res: resource, kind: _Kind, request: Any) -> dict[str, Any]:
        data = request.data
        if not isinstance(data, dict):
            raise api_error(400, "BadRequest", "the body is not a JSON object")
        raw = copy.deepcopy(data)
        meta = raw.setdefault("metadata", {})
        namespace = request.namespace
        if meta.get("namespace") not in (None, namespace):
            raise api_error(400, "BadRequest", "the namespace of the provided object does not match the "
                                               "namespace sent on the request")
        name = meta.get("name") or (meta["generateName"] + secrets.token_hex(3)[:5] if meta.get("generateName")
                                    else None)
        if not name:
            raise api_error(422, "Invalid", "metadata.name: Required value: name or generateName is required")
        if res == PODS:
            containers = (raw.get("spec") or {}).get("containers") or []
            if not containers or not all(c.get("name") and c.get("image") for c in containers):
                raise api_error(422, "Invalid", f'Pod "{name}" is invalid: spec.containers: Required value '
                                                "(each with a name and an image)")
            if self.faults.creation_delay:
                await asyncio.sleep(self.faults.creation_delay)
        if self._stored(res, namespace, name) is not None:
            raise api_error(409, "AlreadyExists", f'{res.plural} "{name}" already exists', name=name,
                            kind=res.plural)
        meta |= {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()), "creationTimestamp": status.now(),
                 "generation": 1}
        raw.setdefault("apiVersion", kind.api_version)
        raw.setdefault("kind", kind.kind)
        if res == PODS:
            raw["spec"]["nodeName"] = status.NODE
            raw["status"] = {"phase": "Pending"}
        self._commit(res, raw, "ADDED")
        if res == PODS:
            self.seen.add("created", f"{namespace}/{name}")
            self.seen.add("containers", copy.deepcopy(raw["spec"]["containers"][0]))
            self.seen.begin("live")
            assert self.kubelet is not None
            self.kubelet.created((namespace, name))
            if self.faults.take("failing_after_create"):
                raise api_error(500, "InternalError", "etcdserver: request timed out")
        return raw

    def _patch(self, res: resource, request: Any) -> dict[str, Any]:
        stored = self._require(res, request.namespace, request.name)
        old = copy.deepcopy(stored.raw)
        data = request.data
        if isinstance(data, list):
            import jsonpatch  # kmock's own dependency

            new = jsonpatch.apply_patch(old, data)
        elif isinstance(data, dict):
            strategic = "strategic" in (request.headers.get("Content-Type") or "")
            new = _merge(old, data, strategic=strategic)
        else:
            raise api_error(400, "BadRequest", "the patch is neither a JSON object nor a JSON patch")
        if request.subresource == "status":
            new = {**old, "status": new.get("status")}
        elif res == PODS:
            new["status"] = old.get("status")
        for field in ("name", "namespace", "uid", "creationTimestamp"):
            new.setdefault("metadata", {})[field] = old["metadata"].get(field)
        self._commit(res, new, "MODIFIED")
        return new

    async def _delete(self, res: resource, namespace: str | None, name: str) -> dict[str, Any]:
        raw = copy.deepcopy(self._require(res, namespace, name).raw)
        if res != PODS:
            return self._remove(res, namespace, name)
        if raw["metadata"].get("deletionTimestamp"):
            return raw  # already terminating
        if self.faults.deletion_delay:
            await asyncio.sleep(self.faults.deletion_delay)
            raw = copy.deepcopy(self._require(res, namespace, name).raw)
        key = (namespace or "", name)
        assert self.kubelet is not None
        if not isinstance(self.kubelet, ContainerKubelet):
            await self.kubelet.stop(key)
            return self._remove(res, namespace, name)
        raw["metadata"] |= {"deletionTimestamp": status.now(), "deletionGracePeriodSeconds": 0}
        self._commit(res, raw, "MODIFIED")
        task = asyncio.create_task(self._finish_deletion(key))
        self._removals.add(task)
        task.add_done_callback(self._removals.discard)
        return raw

    async def _finish_deletion(self, key: Key) -> None:
        assert self.kubelet is not None
        await self.kubelet.stop(key)
        self._remove(PODS, *key)

    async def _watch(self, res: resource, request: Any) -> web.StreamResponse:
        params = request.params
        matches = self._matcher(request)
        timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
        topic = _topic(res)
        watcher = self.hub.subscribe(topic)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            since = params.get("resourceVersion")
            expired = False
            if since and since != "0":
                backlog = self.hub.since(topic, int(since))
                expired = backlog is None
                initial = [(0, _expired(since, self.hub.revision))] if backlog is None else backlog
            else:
                initial = [(0, {"type": "ADDED", "object": obj}) for obj in self.items(res, request.namespace)]
            last = self.hub.revision
            await response.prepare(request._raw_request)
            async with asyncio.timeout(timeout):
                for _, event in initial:
                    if event["type"] == "ERROR" or matches(event["object"]):
                        await response.write(json.dumps(event).encode() + b"\n")
                while not expired and not (watcher.overflowed and watcher.queue.empty()):
                    revision, event = await watcher.queue.get()
                    if revision > last and matches(event["object"]):
                        await response.write(json.dumps(event).encode() + b"\n")
        except (TimeoutError, ConnectionError):
            pass  # the watch's time is up, or its client left
        finally:
            self.hub.unsubscribe(topic, watcher)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await response.write_eof()
        return response

    async def _exec(self, request: Any) -> web.StreamResponse:
        namespace, name = request.namespace, request.name
        key = (namespace, name)
        pod = self.pod(key)
        if pod is None:
            raise api_error(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods")
        query = request._raw_request.query
        names = [c["name"] for c in pod["spec"]["containers"]]
        container = query.get("container") or names[0]
        if container not in names:
            raise api_error(400, "BadRequest", f"container {container} is not valid for pod {name}")
        command = query.getall("command", [])
        if not command:
            raise api_error(400, "BadRequest", "you must specify at least 1 command")
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            raise api_error(400, "BadRequest", f"cannot exec into a container in a completed pod; current phase "
                                               f"is {phase}")
        if phase != "Running":
            raise api_error(400, "BadRequest", f'unable to upgrade connection: container not found ("{container}")')
        truthy = {"true", "1", "True"}
        call = ExecCall(namespace=namespace, pod_name=name, container=container, command=command,
                        stdin=query.get("stdin") in truthy, tty=query.get("tty") in truthy, pod=pod,
                        stdout=query.get("stdout") in truthy, stderr=query.get("stderr") in truthy)
        assert self.kubelet is not None

        def done(finished: ExecCall, code: int | None) -> None:
            self.seen.add("execs", (f"{namespace}/{name}", finished.command, code))

        live = self._live_execs.setdefault(key, set())
        live.add(call)
        try:
            return await serve_exec(request._raw_request, call, self.kubelet.exec_handler(key), on_done=done)
        finally:
            live.discard(call)

    # --- storage ---------------------------------------------------------------------------------------------

    def _stored(self, res: resource, namespace: str | None, name: str) -> Any:
        key = (res, namespace, name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        return self.objects[key]

    def _require(self, res: resource, namespace: str | None, name: str) -> Any:
        stored = self._stored(res, namespace, name)
        if stored is None:
            raise api_error(404, "NotFound", f'{res.plural} "{name}" not found', name=name, kind=res.plural)
        return stored

    def items(self, res: resource, namespace: str | None) -> list[dict[str, Any]]:
        return [copy.deepcopy(obj.raw) for (kind, ns, _), obj in self.objects.items()
                if kind == res and not obj.deleted and (namespace is None or ns == namespace)]

    def _commit(self, res: resource, raw: dict[str, Any], event: str) -> None:
        """Stores `raw` as the object's newest version with a new resourceVersion, and tells the watches."""
        meta = raw["metadata"]
        meta["resourceVersion"] = self.hub.next_revision()
        key = (res, meta.get("namespace"), meta["name"])
        if key in self.objects:
            self.objects[key].create(raw)
        else:
            self.objects[key] = raw
        self.hub.publish(_topic(res), event, raw)

    def _remove(self, res: resource, namespace: str | None, name: str) -> dict[str, Any]:
        stored = self._require(res, namespace, name)
        raw = copy.deepcopy(stored.raw)
        raw["metadata"]["resourceVersion"] = self.hub.next_revision()
        stored.delete()
        self.hub.publish(_topic(res), "DELETED", raw)
        if res == PODS:
            self.seen.add("deleted", f"{namespace}/{name}")
            self.seen.end("live")
        return raw

    def _page(self, kind: _Kind, items: list[dict[str, Any]], params: Any) -> dict[str, Any]:
        """`limit` and `continue`, in namespace/name order as the API server pages; the token is an offset (no
        consistent snapshot across pages, unlike etcd's)."""
        items.sort(key=lambda obj: (obj["metadata"].get("namespace") or "", obj["metadata"]["name"]))
        start = int(base64.urlsafe_b64decode(params["continue"]).decode()) if params.get("continue") else 0
        limit = int(params["limit"]) if params.get("limit") else 0
        page = items[start:start + limit] if limit > 0 else items[start:]
        body = self._list_body(kind, page)
        if limit > 0 and start + limit < len(items):
            body["metadata"] |= {"continue": base64.urlsafe_b64encode(str(start + limit).encode()).decode(),
                                 "remainingItemCount": len(items) - start - limit}
        return body

    def _list_body(self, kind: _Kind, items: list[dict[str, Any]]) -> dict[str, Any]:
        return {"kind": f"{kind.kind}List", "apiVersion": kind.api_version,
                "metadata": {"resourceVersion": str(self.hub.revision)}, "items": items}

    def _matcher(self, request: Any) -> Any:
        labels = label_selector(request.params.get("labelSelector"))
        fields = field_selector(request.params.get("fieldSelector"))
        namespace = request.namespace
        name = request.name if _verb(request) == "watch" else None  # a watch may name one object

        def matches(obj: dict[str, Any]) -> bool:
            meta = obj.get("metadata") or {}
            return ((namespace is None or meta.get("namespace") == namespace)
                    and (name is None or meta.get("name") == name) and labels(obj) and fields(obj))

        return matches


def _verb(request: Any) -> str:
    method = request.method.value if hasattr(request.method, "value") else str(request.method)
    if request.subresource == "exec":
        return "exec"
    if method == "GET":
        if request.params.get("watch") in ("true", "1"):
            return "watch"
        return "list" if request.name is None else "get"
    if method == "POST" and request.name is None:
        return "create"
    if method == "PATCH" and request.name is not None:
        return "patch"
    if method == "DELETE":
        return "deletecollection" if request.name is None else "delete"
    return method.lower()


def _topic(res: resource) -> str:
    return f"{res.group}/{res.plural}"


def _expired(since: str, current: int) -> dict[str, Any]:
    return {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": f"too old resource version: {since} ({current})",
                                        "reason": "Expired", "code": 410}}


def _merge(base: Any, patch: Any, *, strategic: bool) -> Any:
    """RFC 7386 merge patch; `strategic` also merges the lists Kubernetes merges by key (conditions by type,
    containers and statuses by name) instead of replacing them."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(base) if isinstance(base, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict):
            merged[key] = _merge(merged.get(key), value, strategic=strategic)
        elif strategic and key in _MERGE_KEYS and isinstance(value, list) and isinstance(merged.get(key), list):
            merged[key] = _merge_list(merged[key], value, _MERGE_KEYS[key])
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _merge_list(base: list[Any], patch: list[Any], key: str) -> list[Any]:
    merged = list(base)
    for item in patch:
        index = next((i for i, old in enumerate(merged) if isinstance(old, dict) and isinstance(item, dict)
                      and old.get(key) == item.get(key)), None)
        if index is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[index] = _merge(merged[index], item, strategic=True)
    return merged
