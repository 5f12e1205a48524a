"""The simulated attach/detach controller: a VolumeAttachment per CSI volume a pod on a node uses, gone
DETACH_SECONDS after the last such pod (issue 21 2.9: the simulator models what termination waits for)."""

from __future__ import annotations

from karpy import clock
from karpy.controllers import runtime
from karpy.kube import memory
from karpy.simulator import volume_attachments as va


def _world() -> tuple[memory.InMemoryCluster, clock.VirtualClock, runtime.Manager]:
    vclock = clock.VirtualClock()
    cluster = memory.InMemoryCluster(vclock)
    manager = runtime.Manager(cluster, vclock)
    va.AttachDetachController(cluster, vclock).register(manager)
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    cluster.create({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1"},
                    "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"}}})
    cluster.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "data", "namespace": "default"}, "spec": {"volumeName": "pv-1"}})
    cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db", "namespace": "default"},
                    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}],
                             "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]},
                    "status": {"phase": "Running"}})
    manager.run_due()
    return cluster, vclock, manager


def test_a_pod_using_a_csi_volume_attaches_it_to_its_node() -> None:
    cluster, _, _ = _world()
    (attachment,) = cluster.list("VolumeAttachment")
    assert attachment["metadata"]["name"] == va.attachment_name("pv-1", "ebs.csi.aws.com", "n1")
    assert attachment["spec"] == {"attacher": "ebs.csi.aws.com", "nodeName": "n1",
                                  "source": {"persistentVolumeName": "pv-1"}}
    assert attachment["status"] == {"attached": True}


def test_the_volume_detaches_a_while_after_its_last_pod_is_gone() -> None:
    cluster, vclock, manager = _world()
    cluster.delete("Pod", "db", "default")
    manager.run_due()
    assert len(cluster.list("VolumeAttachment")) == 1
    vclock.advance(va.DETACH_SECONDS)
    manager.run_due()
    assert cluster.list("VolumeAttachment") == []


def test_a_deleted_nodes_attachments_go_at_once() -> None:
    cluster, _, manager = _world()
    cluster.delete("Node", "n1")
    manager.run_due()
    assert cluster.list("VolumeAttachment") == []
