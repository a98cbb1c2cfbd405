"""Credentials are bound by their tenant from now on: keep what works today working, visibly.

For every stored credential, each active or deprecated skill version that names it (and allows the
credential's tenant) gets a binding for its skill name and the endpoints it sends the credential to
(adapter, reconcile, job_status), with an audit row "bound at upgrade" that the tenant's admins see
on the credentials page and can remove. Nothing else is bound; versions in review are not.
"""

from django.db import migrations

from lib.endpoints import endpoint_of

NOTE = "bound at upgrade: a version in use named this credential; remove the binding if it should not go there"


def bind_in_use(apps, schema_editor):
    Credential = apps.get_model("reliability", "Credential")
    CredentialBinding = apps.get_model("reliability", "CredentialBinding")
    CredentialAudit = apps.get_model("reliability", "CredentialAudit")
    SkillVersion = apps.get_model("registry", "SkillVersion")
    pairs = set(Credential.objects.values_list("tenant_id", "tenant__slug", "name"))
    if not pairs:
        return
    versions = list(SkillVersion.objects.filter(status__in=["active", "deprecated"]).select_related("skill"))
    for tenant_id, slug, name in sorted(pairs):
        for version in versions:
            manifest = version.manifest or {}
            execution = manifest.get("execution") or {}
            tenants = (manifest.get("permissions") or {}).get("allowed_tenants") or []
            if execution.get("credential") != name or ("*" not in tenants and slug not in tenants):
                continue
            for key in ("adapter", "reconcile", "job_status"):
                if not execution.get(key):
                    continue
                endpoint = endpoint_of(str(execution[key]))
                _, created = CredentialBinding.objects.get_or_create(
                    tenant_id=tenant_id, credential_name=name, skill_pattern=version.skill.name, endpoint=endpoint)
                if created:
                    CredentialAudit.objects.create(
                        tenant_id=tenant_id, credential_name=name, action="bound", actor_label="operator (upgrade)",
                        detail={"skill_pattern": version.skill.name, "endpoint": endpoint, "note": NOTE})


class Migration(migrations.Migration):
    dependencies = [
        ("reliability", "0002_credential_bindings"),
        ("registry", "0004_search_vector"),
    ]

    operations = [migrations.RunPython(bind_in_use, migrations.RunPython.noop)]
