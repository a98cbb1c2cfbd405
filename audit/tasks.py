from celery import shared_task

from audit import chain


@shared_task
def sign_checkpoints() -> int:
    """Sign the head of every audit chain that grew since its last checkpoint (beat: CELERY_BEAT_SCHEDULE)."""
    return chain.write_checkpoints()
