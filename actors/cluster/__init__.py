"""Scale-out on one host: a supervisor, worker processes, sharded agents.

See ``docs/scale-out.md``. The `Coordinator` interface (claim, release, watch, leases,
fencing epochs) is what the multi-host issue backs with etcd.
"""

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
from actors.cluster._shards import rendezvous_owner as rendezvous_owner
from actors.cluster._shards import shard_of as shard_of

__all__ = [
    "DEFAULT_SHARDS",
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
    "rendezvous_owner",
    "shard_of",
]
