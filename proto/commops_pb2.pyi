from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OpKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OP_KIND_UNKNOWN: _ClassVar[OpKind]
    ALL_REDUCE: _ClassVar[OpKind]
    ALL_GATHER: _ClassVar[OpKind]
    REDUCE_SCATTER: _ClassVar[OpKind]
    ALL_TO_ALL: _ClassVar[OpKind]
    BROADCAST: _ClassVar[OpKind]
    REDUCE: _ClassVar[OpKind]
    SEND: _ClassVar[OpKind]
    RECV: _ClassVar[OpKind]
    BARRIER: _ClassVar[OpKind]
    GATHER: _ClassVar[OpKind]
    SCATTER: _ClassVar[OpKind]
OP_KIND_UNKNOWN: OpKind
ALL_REDUCE: OpKind
ALL_GATHER: OpKind
REDUCE_SCATTER: OpKind
ALL_TO_ALL: OpKind
BROADCAST: OpKind
REDUCE: OpKind
SEND: OpKind
RECV: OpKind
BARRIER: OpKind
GATHER: OpKind
SCATTER: OpKind

class RecordBatch(_message.Message):
    __slots__ = ("strings", "job", "rank", "comm", "seq", "op", "peer", "nbytes", "iteration", "t_issue_ns", "t_start_ns", "t_end_ns", "dropped", "rendezvous")
    STRINGS_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    COMM_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    NBYTES_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    T_ISSUE_NS_FIELD_NUMBER: _ClassVar[int]
    T_START_NS_FIELD_NUMBER: _ClassVar[int]
    T_END_NS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    RENDEZVOUS_FIELD_NUMBER: _ClassVar[int]
    strings: _containers.RepeatedScalarFieldContainer[str]
    job: _containers.RepeatedScalarFieldContainer[int]
    rank: _containers.RepeatedScalarFieldContainer[int]
    comm: _containers.RepeatedScalarFieldContainer[int]
    seq: _containers.RepeatedScalarFieldContainer[int]
    op: _containers.RepeatedScalarFieldContainer[OpKind]
    peer: _containers.RepeatedScalarFieldContainer[int]
    nbytes: _containers.RepeatedScalarFieldContainer[int]
    iteration: _containers.RepeatedScalarFieldContainer[int]
    t_issue_ns: _containers.RepeatedScalarFieldContainer[int]
    t_start_ns: _containers.RepeatedScalarFieldContainer[int]
    t_end_ns: _containers.RepeatedScalarFieldContainer[int]
    dropped: int
    rendezvous: str
    def __init__(self, strings: _Optional[_Iterable[str]] = ..., job: _Optional[_Iterable[int]] = ..., rank: _Optional[_Iterable[int]] = ..., comm: _Optional[_Iterable[int]] = ..., seq: _Optional[_Iterable[int]] = ..., op: _Optional[_Iterable[_Union[OpKind, str]]] = ..., peer: _Optional[_Iterable[int]] = ..., nbytes: _Optional[_Iterable[int]] = ..., iteration: _Optional[_Iterable[int]] = ..., t_issue_ns: _Optional[_Iterable[int]] = ..., t_start_ns: _Optional[_Iterable[int]] = ..., t_end_ns: _Optional[_Iterable[int]] = ..., dropped: _Optional[int] = ..., rendezvous: _Optional[str] = ...) -> None: ...

class IterationBatch(_message.Message):
    __slots__ = ("strings", "job", "rank", "iteration", "t_start_ns", "t_end_ns", "rendezvous")
    STRINGS_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    T_START_NS_FIELD_NUMBER: _ClassVar[int]
    T_END_NS_FIELD_NUMBER: _ClassVar[int]
    RENDEZVOUS_FIELD_NUMBER: _ClassVar[int]
    strings: _containers.RepeatedScalarFieldContainer[str]
    job: _containers.RepeatedScalarFieldContainer[int]
    rank: _containers.RepeatedScalarFieldContainer[int]
    iteration: _containers.RepeatedScalarFieldContainer[int]
    t_start_ns: _containers.RepeatedScalarFieldContainer[int]
    t_end_ns: _containers.RepeatedScalarFieldContainer[int]
    rendezvous: str
    def __init__(self, strings: _Optional[_Iterable[str]] = ..., job: _Optional[_Iterable[int]] = ..., rank: _Optional[_Iterable[int]] = ..., iteration: _Optional[_Iterable[int]] = ..., t_start_ns: _Optional[_Iterable[int]] = ..., t_end_ns: _Optional[_Iterable[int]] = ..., rendezvous: _Optional[str] = ...) -> None: ...

class ParallelLayout(_message.Message):
    __slots__ = ("tp", "pp", "dp", "ep", "cp", "order", "gpus_per_host")
    TP_FIELD_NUMBER: _ClassVar[int]
    PP_FIELD_NUMBER: _ClassVar[int]
    DP_FIELD_NUMBER: _ClassVar[int]
    EP_FIELD_NUMBER: _ClassVar[int]
    CP_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_HOST_FIELD_NUMBER: _ClassVar[int]
    tp: int
    pp: int
    dp: int
    ep: int
    cp: int
    order: str
    gpus_per_host: int
    def __init__(self, tp: _Optional[int] = ..., pp: _Optional[int] = ..., dp: _Optional[int] = ..., ep: _Optional[int] = ..., cp: _Optional[int] = ..., order: _Optional[str] = ..., gpus_per_host: _Optional[int] = ...) -> None: ...

class RankPlacement(_message.Message):
    __slots__ = ("rank", "host", "gpu")
    RANK_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    rank: int
    host: str
    gpu: int
    def __init__(self, rank: _Optional[int] = ..., host: _Optional[str] = ..., gpu: _Optional[int] = ...) -> None: ...

class HostRun(_message.Message):
    __slots__ = ("host", "first_rank", "count", "first_gpu")
    HOST_FIELD_NUMBER: _ClassVar[int]
    FIRST_RANK_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FIRST_GPU_FIELD_NUMBER: _ClassVar[int]
    host: str
    first_rank: int
    count: int
    first_gpu: int
    def __init__(self, host: _Optional[str] = ..., first_rank: _Optional[int] = ..., count: _Optional[int] = ..., first_gpu: _Optional[int] = ...) -> None: ...

class RankRun(_message.Message):
    __slots__ = ("start", "count", "step")
    START_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    start: int
    count: int
    step: int
    def __init__(self, start: _Optional[int] = ..., count: _Optional[int] = ..., step: _Optional[int] = ...) -> None: ...

class Communicator(_message.Message):
    __slots__ = ("comm", "kind", "ranks", "runs")
    COMM_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    comm: str
    kind: str
    ranks: _containers.RepeatedScalarFieldContainer[int]
    runs: _containers.RepeatedCompositeFieldContainer[RankRun]
    def __init__(self, comm: _Optional[str] = ..., kind: _Optional[str] = ..., ranks: _Optional[_Iterable[int]] = ..., runs: _Optional[_Iterable[_Union[RankRun, _Mapping]]] = ...) -> None: ...

class JobSpec(_message.Message):
    __slots__ = ("job", "world", "layout", "ranks", "communicators", "host_runs", "rendezvous", "time_resolution_ns")
    JOB_FIELD_NUMBER: _ClassVar[int]
    WORLD_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATORS_FIELD_NUMBER: _ClassVar[int]
    HOST_RUNS_FIELD_NUMBER: _ClassVar[int]
    RENDEZVOUS_FIELD_NUMBER: _ClassVar[int]
    TIME_RESOLUTION_NS_FIELD_NUMBER: _ClassVar[int]
    job: str
    world: int
    layout: ParallelLayout
    ranks: _containers.RepeatedCompositeFieldContainer[RankPlacement]
    communicators: _containers.RepeatedCompositeFieldContainer[Communicator]
    host_runs: _containers.RepeatedCompositeFieldContainer[HostRun]
    rendezvous: str
    time_resolution_ns: int
    def __init__(self, job: _Optional[str] = ..., world: _Optional[int] = ..., layout: _Optional[_Union[ParallelLayout, _Mapping]] = ..., ranks: _Optional[_Iterable[_Union[RankPlacement, _Mapping]]] = ..., communicators: _Optional[_Iterable[_Union[Communicator, _Mapping]]] = ..., host_runs: _Optional[_Iterable[_Union[HostRun, _Mapping]]] = ..., rendezvous: _Optional[str] = ..., time_resolution_ns: _Optional[int] = ...) -> None: ...

class StreamMessage(_message.Message):
    __slots__ = ("records", "iterations")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    records: RecordBatch
    iterations: IterationBatch
    def __init__(self, records: _Optional[_Union[RecordBatch, _Mapping]] = ..., iterations: _Optional[_Union[IterationBatch, _Mapping]] = ...) -> None: ...

class StreamSummary(_message.Message):
    __slots__ = ("accepted", "rejected", "reasons")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    rejected: int
    reasons: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, accepted: _Optional[int] = ..., rejected: _Optional[int] = ..., reasons: _Optional[_Iterable[str]] = ...) -> None: ...

class RegisterJobReply(_message.Message):
    __slots__ = ("job", "communicators")
    JOB_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATORS_FIELD_NUMBER: _ClassVar[int]
    job: str
    communicators: int
    def __init__(self, job: _Optional[str] = ..., communicators: _Optional[int] = ...) -> None: ...

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthReply(_message.Message):
    __slots__ = ("status", "version")
    class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN: _ClassVar[HealthReply.Status]
        SERVING: _ClassVar[HealthReply.Status]
        NOT_SERVING: _ClassVar[HealthReply.Status]
    UNKNOWN: HealthReply.Status
    SERVING: HealthReply.Status
    NOT_SERVING: HealthReply.Status
    STATUS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    status: HealthReply.Status
    version: str
    def __init__(self, status: _Optional[_Union[HealthReply.Status, str]] = ..., version: _Optional[str] = ...) -> None: ...
