#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docker/k8s/: every manifest parses, the DaemonSet and the example pod
agree on the shared directory, socket and agent path (with each other and
with docker/entrypoint.sh), and docs/deploy.md promises exactly those."""
import glob
import os
import re
import sys
import unittest

from installtest import SRC, main

try:
    import yaml
except ImportError:
    print("python3-yaml missing (tools/install-deps installs it)")
    sys.exit(77)

K8S = os.path.join(SRC, "docker", "k8s")
AGENT = "libprofd-agent.so"


def docs(kind):
    out = []
    for path in sorted(glob.glob(os.path.join(K8S, "*.yaml"))):
        with open(path) as f:
            out += [(os.path.basename(path), d) for d in yaml.safe_load_all(f) if d and d.get("kind") == kind]
    return out


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def host_mount(pod_spec, container):
    """(hostPath path, mountPath in the container) of the hostPath volume it mounts."""
    paths = {v["name"]: v["hostPath"]["path"] for v in pod_spec.get("volumes", []) if "hostPath" in v}
    mounts = [(paths[m["name"]], m["mountPath"]) for m in container.get("volumeMounts", []) if m["name"] in paths]
    assert len(mounts) == 1, mounts
    return mounts[0]


def entrypoint_default_dir():
    with open(os.path.join(SRC, "docker", "entrypoint.sh")) as f:
        return re.search(r"\$\{PROFD_AGENT_DIR:-([^}]+)\}", f.read()).group(1)


class Manifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        (cls.ds_file, ds), = docs("DaemonSet")
        cls.ds = ds["spec"]["template"]["spec"]
        (cls.profd,) = [c for c in cls.ds["containers"] if c["name"] == "profd"]
        (cls.pod_file, pod), = docs("Pod")
        cls.pod = pod["spec"]
        (cls.job,) = cls.pod["containers"]
        with open(os.path.join(SRC, "docs", "deploy.md")) as f:
            cls.deploy = f.read()

    def test_every_manifest_parses_into_kubernetes_objects(self):
        files = glob.glob(os.path.join(K8S, "*.yaml"))
        self.assertGreaterEqual(len(files), 2)
        for path in files:
            with open(path) as f:
                for d in yaml.safe_load_all(f):
                    self.assertTrue(d.get("apiVersion") and d.get("kind") and d["metadata"].get("name"), path)

    def test_daemonset_reaches_port_proc_gpus_and_shares_a_host_directory(self):
        ports = self.profd.get("ports", [])
        self.assertTrue(self.ds.get("hostNetwork") or any(p.get("hostPort") == 6009 for p in ports))
        self.assertTrue(any(p["containerPort"] == 6009 for p in ports))
        self.assertIs(self.ds.get("hostPID"), True)
        env = env_of(self.profd)
        self.assertTrue(self.ds.get("runtimeClassName") or env.get("NVIDIA_VISIBLE_DEVICES") == "all")
        host, mount = host_mount(self.ds, self.profd)
        # The entrypoint copies the agent into that mount, the socket lives there.
        self.assertEqual(env.get("PROFD_AGENT_DIR", entrypoint_default_dir()), mount)
        self.assertEqual(os.path.dirname(env.get("PROFD_AGENT_SOCKET", "/run/profd/agent.sock")), mount)
        self.assertNotIn("nvidia.com/gpu", str(self.profd.get("resources", {})),
                         "profd must not reserve a GPU: it watches all of them")

    def test_pod_loads_the_agent_from_the_daemonsets_directory(self):
        ds_host, ds_mount = host_mount(self.ds, self.profd)
        host, mount = host_mount(self.pod, self.job)
        self.assertEqual(host, ds_host)
        env = env_of(self.job)
        self.assertEqual(env["CUDA_INJECTION64_PATH"], f"{mount}/{AGENT}")
        ds_sock = env_of(self.profd).get("PROFD_AGENT_SOCKET", "/run/profd/agent.sock")
        self.assertEqual(env["PROFD_AGENT_SOCKET"], f"{mount}/{os.path.basename(ds_sock)}")
        self.assertIn("nvidia.com/gpu", self.job["resources"]["limits"])

    def test_deploy_md_promises_what_the_manifests_do(self):
        env = env_of(self.job)
        host, _ = host_mount(self.ds, self.profd)
        for want in (f"CUDA_INJECTION64_PATH={env['CUDA_INJECTION64_PATH']}",
                     f"PROFD_AGENT_SOCKET={env['PROFD_AGENT_SOCKET']}",
                     f"hostPath `{host}`", "hostPID", "hostNetwork", "hostPort 6009",
                     f"docker/k8s/{self.ds_file}", f"docker/k8s/{self.pod_file}",
                     f"runtimeClassName: {self.ds.get('runtimeClassName')}"):
            self.assertIn(want, self.deploy)
        # The address forms each client takes (docs/deploy.md, multi-node).
        self.assertIn("`w1:6009,w2:6009`", self.deploy)
        self.assertIn("`grpc://w1:6009,grpc://w2:6009`", self.deploy)


if __name__ == "__main__":
    main()
