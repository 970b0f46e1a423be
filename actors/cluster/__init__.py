"""Scale-out: a supervisor, worker processes and sharded agents, on one host or several.

See ``docs/scale-out.md`` (one host) and ``docs/cluster.md`` (several hosts on etcd, storage
modes). The `Coordinator` interface (claim, release, watch, leases, fencing epochs, storage
bindings) has an in-process, a wire and an etcd implementation.
"""

from actors.cluster._coordinator import Binding as Binding
from actors.cluster._coordinator import Claim as Claim
from actors.cluster._coordinator import ClusterView as ClusterView
from actors.cluster._coordinator import Coordinator as Coordinator
from actors.cluster._coordinator import CoordinatorError as CoordinatorError
from actors.cluster._coordinator import Lease as Lease
from actors.cluster._coordinator import LeaseExpiredError as LeaseExpiredError
from actors.cluster._coordinator import Member as Member
from actors.cluster._coordinator import MemberConflictError as MemberConflictError
from actors.cluster._coordinator_local import InProcessCoordinator as InProcessCoordinator
from actors.cluster._coordinator_wire import RemoteCoordinator as RemoteCoordinator
from actors.cluster._coordinator_wire import coordinator_endpoints as coordinator_endpoints
from actors.cluster._shards import DEFAULT_SHARDS as DEFAULT_SHARDS
from actors.cluster._shards import desired_shards as desired_shards
from actors.cluster._shards import eligible_workers as eligible_workers
from actors.cluster._shards import placement_owner as placement_owner
from actors.cluster._shards import rendezvous_owner as rendezvous_owner
from actors.cluster._shards import shard_of as shard_of

__all__ = [
    "DEFAULT_SHARDS",
    "Binding",
    "Claim",
    "ClusterView",
    "Coordinator",
    "CoordinatorError",
    "InProcessCoordinator",
    "Lease",
    "LeaseExpiredError",
    "Member",
    "MemberConflictError",
    "RemoteCoordinator",
    "coordinator_endpoints",
    "desired_shards",
    "eligible_workers",
    "placement_owner",
    "rendezvous_owner",
    "shard_of",
]
