from django.db import models


class Note(models.Model):
    who = models.CharField(max_length=200)
