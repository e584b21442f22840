"""DataLoader iterators as PyTorch lays them out: `__next__` lives on the base class and calls
the subclass's `_next_data`."""


class _BaseDataLoaderIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._index = 0

    def __iter__(self):
        return self

    def __next__(self):
        return self._next_data()


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def _next_data(self):
        if self._index >= len(self._dataset):
            raise StopIteration
        item = self._dataset[self._index]
        self._index += 1
        return item


class DataLoader:
    def __init__(self, dataset, batch_size=1, num_workers=0):
        self.dataset = dataset

    def __iter__(self):
        return _SingleProcessDataLoaderIter(self)
