"""DataLoader iterators as PyTorch lays them out: `__next__` lives on the base class and calls
the subclass's `_next_data`; the iterator keeps the loader's settings under torch's own private
names (`_num_workers`, `_pin_memory`, `_persistent_workers`, `_index_sampler`, `_num_yielded`)."""


class BatchSampler:
    def __init__(self, batch_size):
        self.batch_size = batch_size


class _BaseDataLoaderIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._index = 0
        self._num_workers = loader.num_workers
        self._pin_memory = loader.pin_memory
        self._persistent_workers = loader.persistent_workers
        self._index_sampler = BatchSampler(loader.batch_size)
        self._num_yielded = 0

    def __iter__(self):
        return self

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        return data


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def _next_data(self):
        if self._index >= len(self._dataset):
            raise StopIteration
        item = self._dataset[self._index]
        self._index += 1
        return item


class DataLoader:
    def __init__(self, dataset, batch_size=1, num_workers=0, pin_memory=False, persistent_workers=False):
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.persistent_workers = persistent_workers

    def __iter__(self):
        return _SingleProcessDataLoaderIter(self)
