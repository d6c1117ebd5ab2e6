"""rmm._cuda.gpu: the current device, through the runtime (the sim)."""
import simcuda


def getDevice():
    return simcuda.current()


def setDevice(device):
    simcuda.set_current(int(device))
