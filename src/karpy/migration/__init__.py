"""Migration aids: ``karpy convert`` (old Karpenter manifests to v1) and ``karpy migrate`` (Cluster
Autoscaler node groups to NodePools and an EC2NodeClass, with the migration steps)."""
